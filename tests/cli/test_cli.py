# SPDX-License-Identifier: BSD-3-Clause
"""The `batonlab` command end to end, in subprocesses as a user runs it."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from batonlab.cli.main import main
from batonlab.rl import checkpoint
from cli_runs import batonlab

TINY = ["env.num_envs=32", "agent.num_steps_per_env=8", "agent.save_interval=2", "progress=false"]


def test_list_and_errors(tmp_path, capsys):
    listed = batonlab("list", cwd=tmp_path)
    assert listed.returncode == 0 and "arm_reach" in listed.stdout
    # The other mistakes in-process (seconds saved per case); tests/cli/test_cli_errors.py runs one as a user does.
    for args, message in [
        (["fly"], "unknown command 'fly'"),
        (["train", "task=arm_rech"], "unknown task 'arm_rech'; valid tasks: ["),
        (["train"], "missing task=<name>"),
        (["train", "task=arm_reach", "env.num_env=4"], "valid keys: ['scene'"),
        (["train", "task=arm_reach", "agent.algorithm.lr=1"], "unknown key 'agent.algorithm.lr'"),
        (["train", "task=arm_reach", "seeed=1"], "valid top-level keys"),
        (["train", "task=arm_reach", "env.num_envs=0"], "num_envs must be >= 1"),
        (["play", "task=arm_reach", f"log_root={tmp_path}/none"], "no run with a checkpoint"),
    ]:
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert message in err, (args, err)


def _assert_quiet(result: subprocess.CompletedProcess) -> None:
    """Only batonlab's own lines: no rsl-rl model summaries, no library warnings."""
    assert all(line.startswith("[batonlab]") for line in result.stdout.splitlines()), result.stdout
    assert "Warning" not in result.stderr and "Actor Model" not in result.stdout + result.stderr, result.stderr


def test_train_resume_play_export(tmp_path):
    trained = batonlab("train", "task=arm_reach", "max_iterations=2", "seed=3", "eval_episodes=4", *TINY, cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    _assert_quiet(trained)
    last_line = trained.stdout.splitlines()[-1]
    assert re.fullmatch(r"\[batonlab\] arm_reach: success rate \d\.\d\d over 4 episodes .*", last_line), last_line
    (run_dir,) = (tmp_path / "logs" / "arm_reach").iterdir()
    assert (run_dir / "model_2.pt").is_file() and (run_dir / "config.yaml").is_file()
    assert any(p.name.startswith("events.out.tfevents") for p in run_dir.iterdir())
    config = (run_dir / "config.yaml").read_text()
    assert "num_envs: 32" in config and "batonlab.observations.proprioception:joint_pos_rel" in config

    resumed = batonlab("train", "task=arm_reach", "max_iterations=3", "resume=true", "eval_episodes=0", *TINY,
                       cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "resuming" in resumed.stdout and "iteration 2" in resumed.stdout
    assert checkpoint.load(run_dir / "model_3.pt")["iter"] == 3

    played = batonlab("play", "task=arm_reach", "play.num_episodes=4", "play.video_episodes=1",
                      "play.video_height=96", "play.video_width=128", "progress=false", cwd=tmp_path)
    assert played.returncode == 0, played.stderr
    _assert_quiet(played)
    metrics = json.loads((run_dir / "play" / "metrics.json").read_text())
    assert metrics["num_episodes"] == 4 and 0.0 <= metrics["success_rate"] <= 1.0
    assert metrics["checkpoint"].endswith("model_3.pt")
    video = run_dir / "play" / "rollout.mp4"
    assert video.is_file() and video.stat().st_size > 1000

    exported = batonlab("export", "task=arm_reach", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    _assert_quiet(exported)
    manifest = json.loads((run_dir / "exported" / "manifest.json").read_text())
    assert manifest["task"] == "arm_reach" and manifest["training_config"]["checkpoint"].endswith("model_3.pt")
    assert (run_dir / "exported" / "policy.onnx").is_file()


@pytest.mark.parametrize("frames", [200])
def test_mp4_is_readable(tmp_path, frames):
    import cv2
    import numpy as np

    from batonlab.sim.render import write_mp4

    path = tmp_path / "clip.mp4"
    write_mp4(path, np.random.default_rng(0).integers(0, 255, (frames, 64, 80, 3), dtype=np.uint8), fps=50)
    capture = cv2.VideoCapture(str(path))
    assert int(capture.get(cv2.CAP_PROP_FRAME_COUNT)) == frames


def test_verbose_shows_the_model_summaries(tmp_path):
    trained = batonlab("train", "task=arm_reach", "max_iterations=1", "eval_episodes=0", "verbose=true", *TINY,
                       cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    assert "Actor Model: MLPModel(" in trained.stdout
