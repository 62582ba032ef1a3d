# SPDX-License-Identifier: BSD-3-Clause
"""Ctrl-C and SIGTERM: training saves the iteration it reached, play closes its bags; exit 130, no traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from batonlab.rl import checkpoint
from cli_runs import batonlab

TINY = ["env.num_envs=8", "agent.num_steps_per_env=8", "progress=false", "eval_episodes=0"]
MCAP_MAGIC = b"\x89MCAP0\r\n"
"""Starts an MCAP file and ends it after the footer (a file cut short ends elsewhere)."""


def _start(*args: str, cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return subprocess.Popen([sys.executable, "-m", "batonlab.cli.main", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(predicate, process: subprocess.Popen, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_ctrl_c_saves_the_current_iteration_and_resume_continues(tmp_path):
    # No periodic checkpoint before iteration 1000: whatever is saved was saved for the interruption.
    args = ["task=arm_reach", f"log_root={tmp_path}", "agent.save_interval=1000", *TINY]
    process = _start("train", "max_iterations=100000", *args, cwd=tmp_path)
    events = lambda: list(tmp_path.glob("arm_reach/*/events.out.tfevents.*"))  # noqa: E731 (written after iteration 1)
    _wait_for(events, process)
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in out + err
    (saved,) = list(tmp_path.glob("arm_reach/*/model_*.pt"))
    iteration = checkpoint.load(saved)["iter"]
    assert iteration >= 1 and saved.name == f"model_{iteration}.pt"
    assert f"interrupted at iteration {iteration}: saved {saved}" in out and "resume=true" in out

    resumed = batonlab("train", f"max_iterations={iteration + 1}", "resume=true", *args, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"from {saved.name} (iteration {iteration})" in resumed.stdout
    assert checkpoint.load(saved.parent / f"model_{iteration + 1}.pt")["iter"] == iteration + 1


def test_sigterm_while_recording_closes_the_bags(tmp_path):
    trained = batonlab("train", "task=arm_reach", "max_iterations=1", f"log_root={tmp_path}", *TINY, cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    bags = tmp_path / "bags"
    # 60 s episodes: the rollout is still running when the signal comes.
    process = _start("play", "task=arm_reach", f"log_root={tmp_path}", f"record={bags}", "play.num_episodes=2",
                     "play.video=false", "env.episode_length_s=60", "progress=false", cwd=tmp_path)
    _wait_for(lambda: len(list(bags.glob("*/*.mcap"))) == 2, process)
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in out + err and "closed 2 bags" in out
    for bag in bags.iterdir():
        assert (bag / "metadata.yaml").is_file(), bag
        (mcap,) = bag.glob("*.mcap")
        data = mcap.read_bytes()
        assert data.startswith(MCAP_MAGIC) and data.endswith(MCAP_MAGIC), f"{mcap} has no footer"
