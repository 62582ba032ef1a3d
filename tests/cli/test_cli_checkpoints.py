# SPDX-License-Identifier: BSD-3-Clause
"""Checkpoints on the command line: found from the file alone, named when missing, refused in one line when
unreadable or of another task, and skipped with a warning when a newer one is corrupt."""

from __future__ import annotations

import shutil
import stat

import pytest

from batonlab.cli.main import main
from batonlab.env.env import BatonEnv
from batonlab.rl import checkpoint
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_agent_cfg, make_task_cfg
from cli_runs import batonlab

TINY = ["env.num_envs=8", "agent.num_steps_per_env=8", "progress=false", "eval_episodes=0"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A two-iteration arm_reach run (model_2.pt)."""
    root = tmp_path_factory.mktemp("cli_checkpoints")
    trained = batonlab("train", "task=arm_reach", "max_iterations=2", f"log_root={root}", *TINY, cwd=root)
    assert trained.returncode == 0, trained.stderr
    (run,) = (root / "arm_reach").iterdir()
    return run


def test_checkpoint_alone_from_another_folder(run_dir, tmp_path):
    played = batonlab("play", f"checkpoint={run_dir / 'model_2.pt'}", "play.num_episodes=2", "play.video=false",
                      "progress=false", cwd=tmp_path)
    assert played.returncode == 0, played.stderr
    assert "arm_reach: success rate" in played.stdout
    assert (run_dir / "play" / "metrics.json").is_file()  # the checkpoint's folder is the run


def test_missing_checkpoint_names_the_file(run_dir, capsys):
    assert main(["play", f"checkpoint={run_dir / 'model_9.pt'}"]) == 2
    err = capsys.readouterr().err
    assert f"checkpoint {run_dir / 'model_9.pt'} does not exist; {run_dir} has ['model_2.pt']" in err


def test_truncated_checkpoint_is_refused_before_the_env(run_dir, tmp_path, capsys, monkeypatch):
    bad = tmp_path / "model_2.pt"
    bad.write_bytes((run_dir / "model_2.pt").read_bytes()[:4000])
    monkeypatch.setattr(BatonEnv, "__init__", _no_env)
    assert main(["play", "task=arm_reach", f"checkpoint={bad}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"batonlab play: checkpoint {bad} is unreadable (truncated or corrupt)")
    assert err.count("\n") == 1, err


def test_checkpoint_of_another_task_names_parameter_and_shapes(tmp_path, capsys):
    cfg = make_task_cfg("wl_balance")
    cfg.num_envs = 2
    env = BatonEnv(cfg)
    BatonRunner(RslRlVecEnv(env), make_agent_cfg("wl_balance")).save(tmp_path / "model_1.pt")
    env.close()
    assert main(["play", "task=arm_reach", f"checkpoint={tmp_path / 'model_1.pt'}", "play.num_episodes=2",
                 "play.video=false", "progress=false"]) == 2
    err = capsys.readouterr().err
    assert "does not fit this actor: actor." in err and "in the checkpoint and [" in err and "in this model" in err
    assert err.count("\n") == 1, err


def test_resume_skips_corrupt_newest_and_removes_stale_temporaries(run_dir, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    (run / "model_3.pt").write_bytes((run / "model_2.pt").read_bytes()[:4000])  # cut short by a full disk
    (run / ".model_3.pt.x8k2m1.tmp").write_bytes(b"partial")  # left by kill -9 during a save
    resumed = batonlab("train", "task=arm_reach", "resume=true", f"run_dir={run}", "max_iterations=3", *TINY,
                       cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"checkpoint {run / 'model_3.pt'} is unreadable" in resumed.stderr and "using model_2.pt" in resumed.stderr
    assert "from model_2.pt (iteration 2)" in resumed.stdout
    assert not list(run.glob(".model_*.tmp"))
    assert checkpoint.load(run / "model_3.pt")["iter"] == 3
    mode = stat.S_IMODE((run / "model_3.pt").stat().st_mode)
    assert mode == stat.S_IMODE((run / "config.yaml").stat().st_mode), oct(mode)


def _no_env(*args, **kwargs):
    raise AssertionError("the env was built before the checkpoint was checked")
