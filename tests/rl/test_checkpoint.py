# SPDX-License-Identifier: BSD-3-Clause
"""Checkpoints: atomic writes, safe loading, and resume that restores the optimizer."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import torch

from batonlab.rl import checkpoint
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_agent_cfg
from conftest import make_reach_env


def _runner(log_dir: Path | None) -> BatonRunner:
    agent = make_agent_cfg("arm_reach")
    agent.num_steps_per_env = 8
    agent.save_interval = 2
    return BatonRunner(RslRlVecEnv(make_reach_env(num_envs=16)), agent, log_dir=log_dir)


def test_save_is_atomic_when_writing_fails(tmp_path, monkeypatch):
    path = tmp_path / "model_1.pt"
    checkpoint.save_atomic({"iter": 1, "w": torch.ones(3)}, path)

    def broken_save(obj, f):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save_atomic({"iter": 2}, path)
    monkeypatch.undo()
    assert checkpoint.load(path)["iter"] == 1  # the previous file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["model_1.pt"]  # no temporary left behind


def test_load_rejects_corrupt_and_missing_files(tmp_path):
    bad = tmp_path / "model_3.pt"
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(RuntimeError, match="corrupt"):
        checkpoint.load(bad)
    with pytest.raises(FileNotFoundError):
        checkpoint.load(tmp_path / "missing.pt")
    (tmp_path / "model_12.pt").write_bytes(b"")
    assert checkpoint.latest_checkpoint(tmp_path).name == "model_12.pt"


def test_resume_restores_iteration_optimizer_and_normaliser(tmp_path):
    torch.manual_seed(0)
    first = _runner(tmp_path)
    first.learn(2, progress=False)
    saved = tmp_path / "model_2.pt"
    assert saved.is_file()

    resumed = _runner(tmp_path)
    resumed.load(saved)
    assert resumed.iteration == 2 and resumed.total_env_steps == first.total_env_steps
    old_opt, new_opt = first.alg.optimizer.state_dict(), resumed.alg.optimizer.state_dict()
    for key, state in old_opt["state"].items():
        assert torch.equal(state["exp_avg"], new_opt["state"][key]["exp_avg"])
        assert torch.equal(state["exp_avg_sq"], new_opt["state"][key]["exp_avg_sq"])
    old_norm = first.alg.get_policy().obs_normalizer
    new_norm = resumed.alg.get_policy().obs_normalizer
    assert torch.equal(old_norm._mean, new_norm._mean) and old_norm.count == new_norm.count
    assert resumed.alg.learning_rate == first.alg.learning_rate

    resumed.learn(4, progress=False)
    assert resumed.iteration == 4
    assert checkpoint.load(tmp_path / "model_4.pt")["iter"] == 4


def test_checkpoint_mode_follows_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        path = checkpoint.save_atomic({"iter": 1}, tmp_path / "model_1.pt")
        (tmp_path / "config.yaml").write_text("x: 1\n")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE((tmp_path / "config.yaml").stat().st_mode) == 0o644


def test_stale_temporaries_are_removed(tmp_path):
    checkpoint.save_atomic({"iter": 1}, tmp_path / "model_1.pt")
    stale = tmp_path / ".model_2.pt.k3j2h1.tmp"  # what `kill -9` during save_atomic leaves
    stale.write_bytes(b"partial")
    (tmp_path / ".hidden").write_text("not ours")
    assert checkpoint.remove_stale_temporaries(tmp_path) == [stale]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".hidden", "model_1.pt"]


def test_newest_readable_checkpoint_skips_corrupt_ones(tmp_path):
    checkpoint.save_atomic({"iter": 4}, tmp_path / "model_4.pt")
    (tmp_path / "model_6.pt").write_bytes((tmp_path / "model_4.pt").read_bytes()[:500])  # truncated
    path, skipped = checkpoint.latest_readable_checkpoint(tmp_path)
    assert path.name == "model_4.pt"
    assert [type(e) for e in skipped] == [checkpoint.CheckpointError] and "model_6.pt" in str(skipped[0])


def test_checkpoint_of_another_model_names_the_parameter(tmp_path):
    other = make_agent_cfg("arm_reach")
    other.policy.actor_hidden_dims = (32, 32, 32)
    BatonRunner(RslRlVecEnv(make_reach_env(num_envs=2)), other).save(tmp_path / "model_1.pt")
    expected = r"actor\.mlp\.0\.weight has shape \[32, 24\] in the checkpoint and \[128, 24\] in this model"
    with pytest.raises(checkpoint.CheckpointError, match=expected):
        _runner(None).load(tmp_path / "model_1.pt")


def test_stop_request_saves_the_current_iteration(tmp_path):
    runner = _runner(tmp_path)

    def stop_after_three(runner: BatonRunner, stats: dict) -> None:
        if runner.iteration == 3:
            runner.request_stop()

    runner.learn(100, progress=False, on_iteration=stop_after_three)
    assert runner.iteration == 3 and runner.last_checkpoint == tmp_path / "model_3.pt"
    assert checkpoint.load(tmp_path / "model_3.pt")["iter"] == 3
    assert sorted(p.name for p in tmp_path.glob("model_*.pt")) == ["model_2.pt", "model_3.pt"]
