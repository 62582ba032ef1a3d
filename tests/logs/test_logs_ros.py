# SPDX-License-Identifier: BSD-3-Clause
"""A bag recorded by policy_node (record:=true) in the ROS 2 sim-to-sim loop replays in simulation."""

from __future__ import annotations

import numpy as np
import pytest

from batonlab.deploy.manifest import sha256_file
from batonlab.logs.bag_reader import open_bag
from batonlab.logs.replay import reevaluate_policy
from batonlab.tasks.replay import replay_open_loop_for
from batonlab.logs.report import write_report


def test_sim_to_sim_bag_replays_in_simulation(tmp_path):
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from batonlab.cli.deploy import run_sim_to_sim
    from ros.exports import make_export
    from ros.nodes import new_domain_id

    rng = np.random.default_rng(0)
    export = make_export(tmp_path / "export", weight=rng.normal(0.0, 0.1, (24, 6)), bias=rng.normal(0.0, 0.3, 6))
    summary = run_sim_to_sim(export, "arm_reach", seed=5, num_episodes=1, domain_id=new_domain_id(),
                             results_file=tmp_path / "results.json", timeout_s=300,
                             policy_params={"record": True, "record_dir": str(tmp_path / "bags"), "record_seed": 5,
                                            "record_robot": "table_arm6"})
    assert summary is not None and summary["episodes"][0]["commands_received"] > 0
    (bag,) = (tmp_path / "bags").iterdir()
    assert (bag / "metadata.yaml").is_file(), "policy_node closes its bag on SIGINT"

    log = open_bag(bag)
    meta = log.metadata
    assert meta["source"] == "policy_node" and meta["task"] == "arm_reach" and meta["seed"] == 5
    assert meta["robot"] == "table_arm6" and meta["manifest_sha256"] == sha256_file(export / "manifest.json")
    assert {"finger_left", "shoulder_yaw"} <= set(log.joint_states.names)
    assert log.joint_commands.values.shape[1] == 6 and "run" in log.policy_steps.safety_state
    assert log.policy_steps.t.size > 100 and log.sensors["ee_pos_b"].values.shape[1] == 3
    assert np.isfinite(log.policy_steps.input_stamp).any()

    # Open loop from the first logged state after the first command, restarting at episode resets.
    result = replay_open_loop_for(log)
    assert result.initial_state == "joint_states" and result.physics == "nominal"
    assert len(result.segments) >= 2, "the warm-up → episode 0 reset is a jump in the log"
    assert np.isfinite(result.rmse) and result.rmse < 0.1, result.rmse_per_joint
    policy = reevaluate_policy(log)  # the export named in the bag
    assert policy.max_abs_diff < 1e-5
    page = write_report(tmp_path / "report", log, result, policy)
    assert "policy_node" in page.read_text() and (tmp_path / "report" / "sim_vs_log_error.png").is_file()


def _limit_file_size():
    """In the child: writes past 96 kB fail with EFBIG, as on a full disk (SIGXFSZ ignored, inherited by exec)."""
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (96 * 1024, 96 * 1024))


def test_policy_node_keeps_controlling_when_recording_fails(tmp_path):
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    import subprocess
    import time

    from batonlab.cli.deploy import node_command, ros_environment, stop
    from ros.exports import arm_reach_manifest, make_export
    from ros.nodes import FakeRobot, new_domain_id

    manifest = arm_reach_manifest()
    export = make_export(tmp_path / "exported", manifest, bias=np.full(6, 0.05))
    domain = new_domain_id()
    fingers = ["finger_left", "finger_right"]
    names = manifest["joints"]["names"]
    robot = FakeRobot(domain, names + fingers, [manifest["default_joint_pos"][n] for n in names] + [0.02, 0.02],
                      rate_hz=100.0)
    params = {"manifest": str(export), "control_rate_hz": 20.0, "ramp_time_s": 0.2, "command_topic": "joint_commands",
              "ignored_joints": fingers, "max_joint_velocity": 10.0, "record": True, "record_dir": str(tmp_path / "bags")}
    log_path = tmp_path / "policy_node.log"
    with open(log_path, "w") as log_file:
        node = subprocess.Popen(node_command("policy_node", params=params), env=ros_environment(domain),
                                stdout=log_file, stderr=subprocess.STDOUT, preexec_fn=_limit_file_size)
    try:
        robot.wait_for_state("run", timeout=90)
        deadline = time.monotonic() + 60
        while "stopped: OSError" not in log_path.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "the policy keeps running without it" in log_path.read_text(), log_path.read_text()
        with robot.lock:
            before = len(robot.commands)
        time.sleep(1.5)
        with robot.lock:
            after = len(robot.commands)
        assert node.poll() is None and after - before >= 15, "commands keep flowing at 20 Hz after the failure"
    finally:
        code = stop(node)
        robot.close()
    output = log_path.read_text()
    assert code == 0 and "Traceback" not in output, output
    assert "File too large" in output
    (bag,) = (tmp_path / "bags").iterdir()
    assert open_bag(bag).truncated  # what reached the disk is still readable
