# SPDX-License-Identifier: BSD-3-Clause
"""policy_node runs a two-level policy (`wl_baton`: the upper level over a whole-body policy, both untrained) over
real ROS 2 against a second process's wheel-legged robot, which also plays the perception node: the baton's and the
holder's positions on sensors/<name> (PointStamped), the tool pose (PoseStamped), RELIABLE or BEST_EFFORT.

Both levels' inputs are the robot's: a baton estimate that never came keeps it passive and says which; one that goes
stale or non-finite stops it, the wheels braking and the legs crouching, with finite commands throughout.
Assertions count control periods and states, never wall-clock durations.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pytest

from batonlab.deploy import load_manifest
from batonlab.deploy.control import input_context
from batonlab.deploy.manifest_robot import TOPIC
from batonlab.deploy.wiring import command_interface
from whole_body import untrained_export, untrained_two_level_export

pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")

from ros.nodes import FakeWheelLeggedRobot, NodeProcess, new_domain_id, robot_and_node  # noqa: E402

BATON, HOLDER = "baton_pos_b", "baton_holder_pos_b"
"""The perceived baton and holder positions [m, arm base frame] (the upper level's inputs)."""

SEEN = {BATON: [0.9, 0.05, 0.0], HOLDER: [0.95, 0.05, -0.08], "ee_pose_b": [0.25, 0.0, 0.05, 1.0, 0.0, 0.0, 0.0]}
"""What the robot's perception reports at rest: the baton ahead in its cup, the tool stowed."""


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """A two-level `wl_baton` export: an untrained upper level over an untrained whole-body policy."""
    lower = untrained_export(tmp_path_factory.mktemp("whole_body"))
    return untrained_two_level_export(tmp_path_factory.mktemp("baton") / "exported", lower, "wl_baton")


@contextlib.contextmanager
def wire(export, tmp_path, reliability: str = "reliable", wait_for: str | None = "run", silent=()):
    """(wheel-legged robot with its perception, policy_node process) on a fresh domain."""
    manifest = load_manifest(export)
    kinds = {j: command_interface(a.type) for a in manifest.actions for j in a.joints}
    kinds.update(dict.fromkeys(manifest.held_joints.names, "position"))
    interfaces = {kind: (f"joint_commands/{kind}", [j for j, k in kinds.items() if k == kind])
                  for kind in ("position", "velocity")}
    read = set(input_context(manifest).joints)
    joints = {name: value for name, value in manifest.default_joint_pos.items() if name in read or name == "finger_right"}
    topics = {name for name, spec in manifest.sensors.items() if spec.source == TOPIC}
    assert topics == set(SEEN), f"the two levels read {sorted(topics)} from topics"
    domain = new_domain_id()
    robot = FakeWheelLeggedRobot(domain, interfaces, joints, reliability=reliability, sensors=SEEN)
    robot.silent.update(silent)
    node = NodeProcess("policy_node", domain, tmp_path, params={
        "manifest": str(export), "ramp_time_s": 0.2, "ignored_joints": ["finger_right"]})
    with robot_and_node(robot, node, wait_for) as pair:
        yield pair


@pytest.mark.parametrize("reliability", ["reliable", "best_effort"])
def test_both_levels_run_on_the_robots_inputs(export, tmp_path, reliability):
    with wire(export, tmp_path, reliability) as (robot, node):
        time.sleep(0.5)
        positions, velocities = robot.command_array("position"), robot.command_array("velocity")
        assert len(positions) > 10 and len(velocities) > 10
        assert np.isfinite(positions).all() and np.isfinite(velocities).all()
        assert robot.state_names()[-1] == "run"


def test_a_missing_baton_estimate_keeps_it_passive_and_a_late_or_broken_one_stops_it(export, tmp_path):
    with wire(export, tmp_path, wait_for="passive", silent=[BATON]) as (robot, node):
        robot.wait_for_state("passive", timeout=30, reason=f"never received sensor '{BATON}'")
        assert "run" not in robot.state_names() and len(robot.command_array("position")) == 0
        robot.silent.clear()
        robot.wait_for_state("run", timeout=30)
        for name, broken, reason in ((BATON, None, f"stale {BATON}"),
                                     (HOLDER, [float("nan"), 0.0, 0.0], f"non-finite {HOLDER}")):
            time.sleep(0.3)
            seen = len(robot.states)
            since = time.monotonic()
            if broken is None:
                robot.silent.add(name)  # the perception node stalls
            else:
                robot.sensors[name] = broken
            stop = robot.wait_for_state("stop", timeout=10, after=seen, reason=reason)
            assert stop["stop_phase"] == "crouch", stop
            time.sleep(0.5)
            wheels = robot.command_array("velocity", since)
            assert np.isfinite(wheels).all() and np.isfinite(robot.command_array("position", since)).all()
            assert np.abs(wheels[-1]).max() == 0.0, "the wheels brake to a standstill"
            robot.silent.clear()
            robot.sensors[name] = list(SEEN[name])
            time.sleep(0.3)
            seen = len(robot.states)
            assert robot.reset().success
            robot.wait_for_state("run", timeout=10, after=seen)
