# SPDX-License-Identifier: BSD-3-Clause
"""A hierarchy's run through the user's commands: `batonlab train` (an upper level cloned from the expert over a
whole-body policy's export, or over the scripted level and fine-tuned over the export), `batonlab export` (both levels,
the whole-body export in `lower/`) and `batonlab deploy` (both levels load joined and dry-run)."""

from __future__ import annotations

import json

import pytest
import torch

from batonlab.cli.main import main
from batonlab.deploy import load_manifest
from batonlab.deploy.manifest import sha256_file
from batonlab.rl import checkpoint
from cli_runs import deploy
from cli_training import export_run, train_run
from whole_body import untrained_export


TINY = ("env.num_envs=4", "agent.max_iterations=1", "agent.num_steps_per_env=8")


@pytest.fixture(scope="module")
def lower(tmp_path_factory) -> str:
    return untrained_export(tmp_path_factory.mktemp("whole_body"))


def test_a_hierarchy_run_exports_both_levels_and_deploys(lower, tmp_path, capsys):
    run = train_run("wl_baton", tmp_path / "logs", f"env.actions.commands.params.export={lower}", "env.num_envs=4",
                    *TINY[1:], "agent.algorithm.class_name=Distillation", "teacher=expert",
                    "agent.algorithm.distillation.teacher_action_prob=1.0")
    out = export_run(run.run_dir, tmp_path / "exported")
    assert sha256_file(out / "lower" / "policy.onnx") == sha256_file(f"{lower}/policy.onnx")
    layer = json.loads((out / "manifest.json").read_text())["actions"][0]
    assert layer["type"] == "whole_body_commands" and layer["command_layer"]["lower"] == "lower"
    manifest = load_manifest(out)
    assert [m.task for m in manifest.levels] == ["wl_baton", "wl_loco_manip_pose"]
    capsys.readouterr()
    code, stdout, stderr = deploy(out, capsys=capsys)
    assert code == 0, stderr
    assert "dry run" in stdout and "state run" in stdout


def test_an_upper_level_cloned_over_the_scripted_level_fine_tunes_over_the_whole_body_policy(lower, tmp_path, capsys):
    """`finetune=` takes a student of `<task>_scripted` (the task's policies, another lower level) for `<task>` over a
    whole-body export, and refuses it for another task."""
    student = train_run("wl_baton_scripted", tmp_path / "students", *TINY, "agent.algorithm.class_name=Distillation",
                        "teacher=expert", "agent.algorithm.distillation.teacher_action_prob=1.0")
    capsys.readouterr()
    tuned = train_run("wl_baton", tmp_path / "tuned", f"env.actions.commands.params.export={lower}",
                      f"finetune={student.run_dir}", *TINY, "agent.algorithm.learning_rate=1e-12",
                      "agent.algorithm.num_learning_epochs=1")
    assert "the student learned on wl_baton_scripted, whose policies are wl_baton's" in capsys.readouterr().out
    start = checkpoint.load(student.checkpoint)["student_state_dict"]
    actor = checkpoint.load(tuned.checkpoint)["actor_state_dict"]
    assert actor.keys() == start.keys()
    torch.testing.assert_close(actor["mlp.0.weight"], start["mlp.0.weight"], atol=1e-6, rtol=0)
    code = main(["train", "task=wl_door", f"env.actions.commands.params.export={lower}", f"finetune={student.run_dir}",
                 f"log_root={tmp_path / 'door'}", *TINY, "progress=false"])
    err = capsys.readouterr().err
    assert code == 2 and "is a run of task 'wl_baton_scripted', this run trains 'wl_door'" in err, err
    assert not (tmp_path / "door").exists()
