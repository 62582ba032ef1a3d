# SPDX-License-Identifier: BSD-3-Clause
"""Record simulation episodes to bags, replay them: exact open-loop round trip, physics gap, report, policy, video."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from batonlab.cli.main import main
from batonlab.export.manifest import manifest_from_env
from batonlab.logs.bag_reader import open_bag
from batonlab.logs.replay import reevaluate_policy
from batonlab.tasks.replay import replay_open_loop_for, write_playback_for
from batonlab.logs.report import write_report
from batonlab.logs.sim_recorder import EpisodeRecorder
from batonlab.rl.evaluate import evaluate
from conftest import make_reach_env
from ros.exports import make_export


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Two arm_reach episodes recorded with a random linear policy (small chunks: many per bag)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("bags")
    env = make_reach_env(num_envs=3, seed=3, play=True)
    rng = np.random.default_rng(0)
    weight, bias = rng.normal(0.0, 0.3, (24, 6)), rng.normal(0.0, 0.3, 6)
    export_dir = make_export(out / "export", manifest_from_env(env, "arm_reach"), weight, bias)
    w, b = torch.as_tensor(weight, dtype=torch.float32), torch.as_tensor(bias, dtype=torch.float32)
    recorder = EpisodeRecorder(env, out, 2, "arm_reach", {"seed": 3, "export_dir": str(export_dir)},
                               prefix="arm_reach", chunk_bytes=16384)
    evaluate(env, lambda obs: obs["policy"] @ w + b, progress=False, step_callback=recorder)
    paths = recorder.close()
    env.close()
    yield paths, export_dir
    torch.set_num_threads(threads)


def test_bags_hold_an_episode_each(recorded):
    paths, _ = recorded
    assert [p.name for p in paths] == ["arm_reach_ep000", "arm_reach_ep001"]
    log = open_bag(paths[1])
    assert log.metadata["task"] == "arm_reach" and log.metadata["episode"] == 1 and log.metadata["seed"] == 3
    assert log.metadata["robot"] == "table_arm6" and len(log.metadata["manifest_sha256"]) == 64
    assert set(log.metadata["physics"]) == {"dof_damping", "dof_frictionloss"}  # arm_reach's randomisation
    assert log.joint_states.position.shape == (200, 8) and log.duration_s == pytest.approx(3.98)
    assert log.joint_states.names[6:] == ("finger_left", "finger_right")  # every 1-DoF joint, as a robot publishes them
    assert log.command_joint_names == list(log.joint_states.names[:6])
    assert log.metadata["uncommanded_ctrl"] == {"gripper": 0.0}
    assert np.isfinite(log.joint_states.effort[:, :6]).all()  # the commanded joints' actuators; NaN for the fingers
    assert log.imu is not None and log.task_commands["ee_target"].values.shape == (200, 3)
    assert log.policy_steps.observation.shape == (200, 24) and log.policy_steps.safety_state[0] == "sim"


def test_open_loop_replay_reproduces_the_logged_trajectory(recorded):
    for path in recorded[0]:
        result = replay_open_loop_for(open_bag(path))
        assert result.initial_state == "metadata" and len(result.segments) == 1
        assert result.t.size == 200
        assert result.rmse < 1e-3, result.rmse_per_joint
        assert result.max_abs_error < 1e-6  # same physics, same state, same targets: bit-for-bit in practice
        # The arm did move: the comparison is not trivially zero.
        assert np.ptp(result.logged_pos, axis=0).max() > 0.05


def test_randomized_physics_shows_a_gap_in_the_report(recorded, tmp_path):
    log = open_bag(recorded[0][0])
    gap = replay_open_loop_for(log, physics="randomized", seed=11)
    nominal = replay_open_loop_for(log, physics="nominal")
    assert gap.rmse > 1e-5 and nominal.rmse > 1e-5
    videos = write_playback_for(log, tmp_path / "report" / "playback.mp4", size=(96, 128), fps=10, webm=True)
    page = write_report(tmp_path / "report", log, gap, None, videos)
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["open_loop"]["rmse"] == pytest.approx(gap.rmse) and summary["open_loop"]["physics"] == "randomized"
    assert summary["open_loop"]["rmse"] > 0
    for name in ("joints.png", "sim_vs_log_error.png", "tracking_error.png"):
        png = tmp_path / "report" / name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        assert f"src='{name}'" in page.read_text()
    text = page.read_text()
    assert "playback.mp4" in text and "<video" in text and "randomized" in text


def test_policy_reevaluation_matches_the_logged_actions(recorded):
    paths, export_dir = recorded
    result = reevaluate_policy(open_bag(paths[0]), export_dir)
    assert result.t.size == 200 and result.max_abs_diff < 1e-5
    assert np.nanmax(np.abs(result.target_diff)) < 1e-5


def test_state_playback_renders_the_logged_states(recorded, tmp_path):
    import cv2

    (video,) = write_playback_for(open_bag(recorded[0][0]), tmp_path / "play.mp4", size=(64, 96), fps=10)
    capture = cv2.VideoCapture(str(video))
    frames = int(capture.get(cv2.CAP_PROP_FRAME_COUNT))
    capture.release()
    assert frames == 40


def test_truncated_bag_is_replayed_up_to_the_cut(recorded, tmp_path):
    from mcap.reader import make_reader

    bag = tmp_path / "cut"
    shutil.copytree(recorded[0][0], bag)
    (mcap_file,) = bag.glob("*.mcap")
    with open(mcap_file, "rb") as f:
        chunks = sorted(make_reader(f).get_summary().chunk_indexes, key=lambda c: c.chunk_start_offset)
    assert len(chunks) >= 6
    cut = chunks[4].chunk_start_offset + chunks[4].chunk_length // 2
    data = mcap_file.read_bytes()
    mcap_file.write_bytes(data[:cut])
    (bag / "metadata.yaml").unlink()  # as after a crash: rosbag2 writes it on close

    log = open_bag(bag)
    assert log.truncated and any("cut" in w for w in log.warnings)
    assert 50 < log.joint_states.t.size < 200
    assert log.metadata["task"] == "arm_reach"  # from the /batonlab/metadata message
    result = replay_open_loop_for(log)
    assert result.rmse < 1e-3 and result.t.size >= log.joint_states.t.size - 1

    report = tmp_path / "report"
    assert main(["replay", str(bag), "--report", str(report), "--size", "48x64", "--fps", "5"]) == 0
    assert "Truncated bag" in (report / "index.html").read_text()
    assert main(["bag", "info", str(bag)]) == 0


def test_bag_cli_info_and_csv_export(recorded, tmp_path, capsys):
    path = recorded[0][0]
    assert main(["bag", "info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["topics"]["/joint_states"]["count"] == 200 and info["topics"]["/joint_states"]["rate_hz"] == pytest.approx(50.0)
    assert info["metadata"]["task"] == "arm_reach" and info["duration_s"] == pytest.approx(3.98)
    assert main(["bag", "info", str(path)]) == 0
    text = capsys.readouterr().out
    assert "/batonlab/policy_step" in text and "50.00 Hz" in text and "manifest_sha256=" in text
    assert main(["bag", "export", str(path), "--csv", str(tmp_path / "csv")]) == 0
    header = (tmp_path / "csv" / "joint_states.csv").read_text().splitlines()
    assert len(header) == 201 and "position.shoulder_yaw" in header[0] and "effort.wrist_roll" in header[0]
    steps = (tmp_path / "csv" / "batonlab_policy_step.csv").read_text().splitlines()
    assert "observation.23" in steps[0] and "safety_state" in steps[0]


def test_replay_cli_all_modes(recorded, tmp_path, capsys):
    path, export_dir = recorded[0][0], recorded[1]
    report = tmp_path / "report"
    assert main(["replay", str(path), "--report", str(report), "--size", "48x64", "--fps", "5"]) == 0
    out = capsys.readouterr().out
    assert "open-loop (logged physics" in out and "policy re-evaluation" in out
    summary = json.loads((report / "summary.json").read_text())
    assert summary["open_loop"]["rmse"] < 1e-3 and summary["policy"]["max_abs_action_diff"] < 1e-5
    assert {"joints.png", "sim_vs_log_error.png", "action_diff.png"} <= set(summary["plots"])
    assert "playback.mp4" in summary["videos"]
    assert main(["replay", str(path), "--mode", "open_loop", "--physics", "randomized", "--seed", "4"]) == 0
    assert "randomized physics" in capsys.readouterr().out
    assert main(["replay", str(path), "--mode", "policy", "--policy", str(export_dir)]) == 0
