# SPDX-License-Identifier: BSD-3-Clause
"""policy_node driven by a robot driver on Eclipse Cyclone DDS: a robot and a DDS vendor we did not write.

policy_node runs in a child process exactly as in tests/deploy_ros/test_deploy_ros.py (rclpy, Fast DDS on
127.0.0.1, one domain per test); the robot is `ros.cyclone_robot.CycloneRobot`, plain Cyclone DDS in
the test process that speaks ROS 2 on the wire (rt/ topics, ROS 2's DDS type names, XCDR1). Nothing
on the robot side imports rclpy, so these tests fail if policy_node only works with robots that
share its middleware.

The control rate is 20 Hz as in test_deploy_ros.py, but the stale timeout is raised from two periods
to 0.5 s: these tests are about the wire, and on a busy 2-core CI machine a Python driver is sometimes
descheduled for 100-200 ms (measured), which the default 100 ms timeout rightly calls a stale robot.
test_deploy_ros.py covers the watchdog's own timing.

Cross-vendor quirk: the robot's subscription to the latched ~/state can get the node's reports up to
one Fast DDS heartbeat period (3 s) late. When the node's writer announces its history before Cyclone
has discovered that writer, Cyclone drops the announcement and waits for the next one (eProsima/Fast-DDS
issue 2424 describes the same). Live data is not delayed; the timeouts below allow for it.
"""

import contextlib
import time

import numpy as np
import pytest

from ros.exports import arm_reach_manifest, make_export

pytest.importorskip("rclpy", reason="policy_node needs rclpy: pip install batonlab[ros]")
pytest.importorskip("cyclonedds", reason="the robot driver needs Cyclone DDS: pip install batonlab[test]")

from ros.cyclone_robot import CycloneRobot  # noqa: E402
from ros.nodes import NodeProcess, new_domain_id, robot_and_node  # noqa: E402

RATE_HZ = 20.0
STALE_TIMEOUT_S = 0.5
ARM = ["shoulder_yaw", "shoulder_pitch", "elbow_pitch", "forearm_roll", "wrist_pitch", "wrist_roll"]
FINGERS = ["finger_left", "finger_right"]
MANIFEST = arm_reach_manifest()
DEFAULT_POSE = [MANIFEST["default_joint_pos"][j] for j in ARM] + [0.02, 0.02]
BIAS = 0.05
"""Output of the linear test policy (weights zero); the joint command is then offset + scale * BIAS."""
ARM_ACTION = MANIFEST["actions"][0]


@contextlib.contextmanager
def cyclone_wire(tmp_path, reliability: str = "reliable"):
    """(Cyclone robot, policy_node process) on a fresh domain, the node already in run.

    On exit the node gets SIGINT while the robot still publishes, as when an operator stops the
    policy on a live robot, and must exit with code 0 and no traceback.
    """
    export = make_export(tmp_path / "exported", arm_reach_manifest(), bias=np.full(6, BIAS))
    domain = new_domain_id()
    robot = CycloneRobot(domain, ARM + FINGERS, DEFAULT_POSE, reliability=reliability)
    params = {"manifest": str(export), "control_rate_hz": RATE_HZ, "stale_timeout_s": STALE_TIMEOUT_S,
              "ramp_time_s": 0.2, "command_topic": "joint_commands", "ignored_joints": FINGERS,
              "max_joint_velocity": 10.0}
    node = NodeProcess("policy_node", domain, tmp_path, params=params)
    with robot_and_node(robot, node) as pair:
        yield pair


def wait_for_commands(robot: CycloneRobot, count: int, since: float, timeout: float = 10.0) -> np.ndarray:
    """The joint commands taken after time.monotonic() `since`, once there are at least `count`."""
    deadline = time.monotonic() + timeout
    while True:
        with robot.lock:
            commands = [c for t, c in robot.commands if t > since]
        if len(commands) >= count or time.monotonic() > deadline:
            assert len(commands) >= count, f"{len(commands)} joint commands in {timeout} s, expected {count}"
            return np.array(commands)
        time.sleep(0.02)


def states_in_order(robot: CycloneRobot) -> list[str]:
    names = robot.state_names()
    return [s for k, s in enumerate(names) if k == 0 or names[k - 1] != s]


@pytest.mark.parametrize("reliability", ["reliable", "best_effort"])
def test_a_cyclone_driver_gets_the_policys_joint_commands(tmp_path, reliability):
    with cyclone_wire(tmp_path, reliability) as (robot, node):
        assert states_in_order(robot)[:3] == ["passive", "ramp", "run"]
        run = robot.wait_for_state("run", timeout=0)
        commands = wait_for_commands(robot, 5, since=run["received"])
        assert commands.shape[1] == len(ARM) and np.isfinite(commands).all()
        expected = np.array(DEFAULT_POSE[:6]) + np.array(ARM_ACTION["scale"]) * BIAS
        np.testing.assert_allclose(commands[-1], expected, atol=1e-6)


def test_a_cyclone_estop_stops_the_node(tmp_path):
    with cyclone_wire(tmp_path) as (robot, node):
        seen = len(robot.states)
        robot.estop(True)
        stop = robot.wait_for_state("stop", timeout=10, after=seen)
        assert stop["reason"] == "e-stop" and stop["estop_latched"], stop


def test_silent_cyclone_joint_states_stop_the_node(tmp_path):
    with cyclone_wire(tmp_path) as (robot, node):
        seen = len(robot.states)
        robot.publish_joints = False
        stop = robot.wait_for_state("stop", timeout=10, after=seen)
        assert stop["reason"].startswith("stale joint_states"), stop["reason"]
