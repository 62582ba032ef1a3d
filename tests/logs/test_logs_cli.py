# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab play --record DIR`, `batonlab replay BAG --report DIR`, `batonlab bag …` as a user runs them."""

from __future__ import annotations

import json

from cli_runs import batonlab

TINY = ["env.num_envs=8", "agent.num_steps_per_env=4", "agent.save_interval=1", "progress=false"]


def test_play_record_then_replay_report(tmp_path):
    trained = batonlab("train", "task=arm_reach", "max_iterations=1", "seed=5", *TINY, cwd=tmp_path)
    assert trained.returncode == 0, trained.stderr
    played = batonlab("play", "task=arm_reach", "play.num_episodes=3", "play.video=false", "play.record_episodes=2",
                      "--record", "bags", "progress=false", cwd=tmp_path)
    assert played.returncode == 0, played.stderr
    assert "recorded 2 episodes to bags" in played.stdout
    bags = sorted(p for p in (tmp_path / "bags").iterdir())
    assert len(bags) == 2 and all((b / "metadata.yaml").is_file() for b in bags)

    info = batonlab("bag", "info", str(bags[0]), "--json", cwd=tmp_path)
    assert info.returncode == 0, info.stderr
    info = json.loads(info.stdout)
    assert info["metadata"]["task"] == "arm_reach" and info["metadata"]["seed"] == 42
    assert info["metadata"]["checkpoint"].endswith("model_1.pt")
    assert info["topics"]["/joint_states"]["count"] == 200

    replayed = batonlab("replay", str(bags[0]), "--report", "report", "--size", "48x64", "--fps", "5", cwd=tmp_path)
    assert replayed.returncode == 0, replayed.stderr
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["open_loop"]["rmse"] < 1e-3
    assert "policy" in summary["skipped"]  # nothing exported yet: re-evaluation needs --policy
    assert (tmp_path / "report" / "index.html").is_file() and (tmp_path / "report" / "playback.mp4").is_file()

    exported = batonlab("export", "task=arm_reach", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    (export_dir,) = (tmp_path / "logs" / "arm_reach").glob("*/exported")
    policy = batonlab("replay", str(bags[1]), "--mode", "policy", "--policy", str(export_dir), cwd=tmp_path)
    assert policy.returncode == 0, policy.stderr
    assert "actions max |diff|" in policy.stdout
    max_diff = float(policy.stdout.split("actions max |diff| ")[1].split()[0].rstrip(","))
    assert max_diff < 1e-4

    csv = batonlab("bag", "export", str(bags[1]), "--csv", "csv", cwd=tmp_path)
    assert csv.returncode == 0, csv.stderr
    assert (tmp_path / "csv" / "joint_commands.csv").is_file()
