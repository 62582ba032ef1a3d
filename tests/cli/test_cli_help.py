# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab <command> --help`: the command's options from conf/batonlab.yaml and, with a task, its keys."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from batonlab.cli.main import main
from batonlab.cli.options import CONF_FILE, defaults, documented_options
from cli_runs import batonlab


def test_train_help_in_a_shell(tmp_path):
    result = batonlab("train", "--help", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "max_iterations=null" in result.stdout and "total iterations" in result.stdout
    assert "play.num_episodes" not in result.stdout  # a play option


@pytest.mark.parametrize("command,listed,unlisted", [
    ("train", ["resume=false", "eval_episodes=200", "verbose=false"], ["play.video", "record", "export.out_dir"]),
    ("play", ["play.num_episodes=200", "record=null", "run_dir=null"], ["resume", "max_iterations", "export.out_dir"]),
    ("export", ["export.out_dir=null", "run_dir=null"], ["resume", "play.num_episodes", "record"]),
])
def test_command_options(command, listed, unlisted, capsys):
    assert main([command, "-h"]) == 0
    out = capsys.readouterr().out
    keys = [line.split("=")[0].strip() for line in out.splitlines() if line.startswith("  ")]
    for text in listed:
        assert f"\n  {text}" in out, (text, out)
    for key in unlisted:
        assert key not in keys, (key, out)
    assert "seeds torch and the env's generator" in out  # the comment of `seed` in batonlab.yaml


def test_task_keys_with_current_values(capsys):
    assert main(["train", "task=arm_reach", "--help"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0] for line in out.splitlines() if line.startswith("  env.") or line.startswith("  agent.")}
    for key in ["env.num_envs=1024", "env.rewards.ee_near.weight=1.0", "env.rewards.ee_near.params.std=0.1",
                "env.sim.backend=mujoco", "env.observations.policy.terms.joint_vel.scale=0.1",
                "env.commands.ee_target.params.x_range=[0.25,", "agent.algorithm.learning_rate=0.001",
                "agent.policy.actor_hidden_dims=[128,"]:
        assert key in lines, key
    assert not any(key.startswith(("env.rewards.ee_near.func", "env.scene.build", "env.seed")) for key in lines)
    assert main(["play", "task=arm_reach", "--help"]) == 0
    assert "env.num_envs=16" in capsys.readouterr().out  # play lists the play variant


def test_unknown_task_in_help(capsys):
    assert main(["train", "task=nope", "--help"]) == 2
    assert "unknown task 'nope'" in capsys.readouterr().err


def test_options_file_and_types_agree():
    data = yaml.safe_load(CONF_FILE.read_text())
    assert dataclasses.asdict(defaults()) == data  # every key typed, every type matching its default
    flat = {f"{k}.{sub}" for k, v in data.items() if isinstance(v, dict) for sub in v}
    flat |= {k for k, v in data.items() if not isinstance(v, dict)}
    assert {d.key for d in documented_options()} == flat
    assert all(d.comment for d in documented_options()), "every option needs a comment"
