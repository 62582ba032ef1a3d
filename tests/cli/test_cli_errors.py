# SPDX-License-Identifier: BSD-3-Clause
"""Command-line mistakes fail in one line naming the key and what it expects, exit code 2, before any simulation."""

from __future__ import annotations

import pytest
import torch

from batonlab.cli.main import main
from cli_runs import batonlab

BAD_OVERRIDES = [
    (["env.num_envs=2.5"], "env.num_envs=2.5: expected an integer"),
    (["max_iterations=abc"], "max_iterations=abc: expected an integer"),
    (["seed=abc"], "seed=abc: expected an integer"),
    (["play.num_episodes=1.5"], "play.num_episodes=1.5: expected an integer"),
    (["agent.algorithm.learning_rate=fast"], "agent.algorithm.learning_rate=fast: expected a number"),
    (["env.rewards.ee_near.params.std=wide"], "env.rewards.ee_near.params.std=wide: expected a number"),
    (["env.commands.ee_target.resampling_time_range_s=[1,2,3]"], "expected a list of 2 numbers"),
    (["env.sim.backend=foo"], "env.sim.backend=foo: expected one of ['mujoco', 'mujoco_warp']"),
    (["max_iterations=0"], "max_iterations=0: expected an integer >= 1"),
    (["max_iterations=-5"], "max_iterations=-5: expected an integer >= 1"),
    (["agent.max_iterations=0"], "agent.max_iterations=0: expected an integer >= 1"),
    (["+max_iterations=3"], "no keys to add with '+'; valid top-level keys: ['task', 'robot', 'seed'"),
    (["++env.num_envs=3"], "no keys to add with '+'"),
    (["+foo=1"], "no keys to add with '+'"),
    (["seeed=1"], "unknown top-level key 'seeed'; valid top-level keys: ['task', 'robot', 'seed'"),
    (["env.seed=3"], "use seed=..."),
    (["task.num_envs=3"], "'task' is a string or null, it has no key 'num_envs' (the task's config is reached with env.*"),
    (["resume=true", "run_dir=nowhere"], "run_dir nowhere does not exist"),
    (["agent.algorithm.class_name=P3O"], "agent.algorithm.class_name=P3O learns from constraint costs and this task has none"),
    (["agent.algorithm.class_name=Bogus"], "agent.algorithm.class_name=Bogus: expected one of ['PPO', 'P3O', 'PPOLagrangian', 'Distillation']"),
]


@pytest.mark.parametrize("extra,message", BAD_OVERRIDES, ids=[" ".join(a) for a, _ in BAD_OVERRIDES])
def test_bad_override_is_one_line_before_any_simulation(extra, message, tmp_path, capsys, monkeypatch):
    import batonlab.env.env as env_module

    monkeypatch.setattr(env_module.BatonEnv, "__init__", _no_env)
    code = main(["train", "task=arm_reach", f"log_root={tmp_path}", *extra])
    err = capsys.readouterr().err
    assert code == 2, err
    assert message in err and err.startswith("batonlab train: ") and err.count("\n") == 1, err


@pytest.mark.parametrize("key", ["device", "env.sim.device"])
def test_cuda_without_cuda(key, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a machine without CUDA, wherever this runs
    assert main(["train", "task=arm_reach", f"log_root={tmp_path}", f"{key}=cuda"]) == 2
    assert f"{key}=cuda: CUDA is not available" in capsys.readouterr().err


def test_a_user_sees_no_traceback(tmp_path):
    result = batonlab("train", "task=arm_reach", "env.num_envs=2.5", f"log_root={tmp_path}", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "batonlab train: env.num_envs=2.5: expected an integer\n"
    assert not (tmp_path / "arm_reach").exists()


def _no_env(*args, **kwargs):
    raise AssertionError("the env was built before the mistake was reported")
