# SPDX-License-Identifier: BSD-3-Clause
"""policy_node runs the wheel-legged policy (wl_velocity) over real ROS 2 against a second process's robot.

policy_node runs in a child process exactly as on a robot, at the manifest's 50 Hz; the robot is
`ros.nodes.FakeWheelLeggedRobot` in the test process (RELIABLE or BEST_EFFORT): it publishes joint
states for legs, wheels and the stowed arm, a REP-145 IMU, odometry and cmd_vel, takes legs + arm on
joint_commands/position and the wheels on joint_commands/velocity, and records every command with
its arrival time. The policy is the real wl_velocity manifest with a linear ONNX policy whose wheel
actions have a bias (the wheels turn at 8 rad/s), so braking is visible, and whose other weights
pass the command through: wheel speed 8·(1 + vx ∓ wz) for left/right, leg offset 0.25·(height − default).

Assertions count control periods, never wall-clock durations.
"""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np
import pytest

from ros.exports import make_export, wl_velocity_manifest

pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")

from batonlab.deploy.manifest import parse_manifest  # noqa: E402
from ros.nodes import CpuLoad, FakeWheelLeggedRobot, NodeProcess, new_domain_id, robot_and_node  # noqa: E402

MANIFEST = wl_velocity_manifest()
TYPED = parse_manifest(MANIFEST)
DT = TYPED.control_dt
RATE_HZ = TYPED.control_rate_hz  # 50 Hz
LEGS = list(TYPED.actions[0].joints)
WHEELS = list(TYPED.actions[1].joints)
HELD = list(TYPED.held_joints.names)  # the stowed arm and its finger
COMMAND_JOINTS = list(TYPED.joint_names) + HELD  # the command vector: policy joints (legs, wheels), then held joints
POSITION_JOINTS = LEGS + HELD  # its position joints, in its order
ROBOT_JOINTS = LEGS + WHEELS + HELD + ["finger_right"]  # finger_right mirrors finger_left: not commanded
DEFAULT = {name: MANIFEST["default_joint_pos"].get(name, 0.0) for name in ROBOT_JOINTS}
HEIGHT = TYPED.commands["base_velocity"].default[2]
WHEEL_SCALE = TYPED.actions[1].scale[0]
WHEEL_SPEED = WHEEL_SCALE * 1.0  # the bias of the wheel actions
CROUCH = dict(TYPED.stop.pose)
STOP_DECELERATION = 20.0  # SafetyCfg's default [rad/s²]
INTERFACES = {"position": ("joint_commands/position", POSITION_JOINTS), "velocity": ("joint_commands/velocity", WHEELS)}


def linear_policy() -> tuple[np.ndarray, np.ndarray]:
    """Weights: wheels ← 1 + vx ∓ wz, legs ← height − default height; everything else zero."""
    offsets, k = {}, 0
    for term in TYPED.obs_terms:
        offsets[term.name] = k
        k += term.width
    command = offsets["command"]
    weight, bias = np.zeros((TYPED.obs_dim, TYPED.action_dim)), np.zeros(TYPED.action_dim)
    weight[command + 0, 4:6] = 1.0  # lin_vel_x
    weight[command + 1, 4], weight[command + 1, 5] = -1.0, 1.0  # ang_vel_z: left slower, right faster
    weight[command + 2, 0:4] = 1.0  # height
    bias[0:4], bias[4:6] = -HEIGHT, 1.0
    return weight, bias


def expected_legs(height: float = HEIGHT) -> np.ndarray:
    return np.array([DEFAULT[n] for n in LEGS]) + 0.25 * (np.float32(height) - np.float32(HEIGHT))


@contextlib.contextmanager
def wire(tmp_path, reliability: str = "reliable", wait_for: str | None = "run", interfaces=None, robot_args=None, **params):
    """(wheel-legged robot, policy_node process) on a fresh domain; by default the node is already in run."""
    weight, bias = linear_policy()
    export = make_export(tmp_path / "exported", MANIFEST, weight, bias)
    domain = new_domain_id()
    robot = FakeWheelLeggedRobot(domain, interfaces or INTERFACES, DEFAULT, reliability=reliability, **(robot_args or {}))
    node = NodeProcess("policy_node", domain, tmp_path, params={
        "manifest": str(export), "ramp_time_s": 0.2, "ignored_joints": ["finger_right"], **params})
    with robot_and_node(robot, node, wait_for) as pair:
        yield pair


def wait_for_commands(robot: FakeWheelLeggedRobot, kind: str, count: int, since: float, timeout: float = 10.0) -> np.ndarray:
    deadline = time.monotonic() + timeout
    while True:
        commands = robot.command_array(kind, since)
        if len(commands) >= count or time.monotonic() > deadline:
            assert len(commands) >= count, f"{len(commands)} {kind} commands in {timeout} s, expected {count}"
            return commands
        time.sleep(0.02)


def check_stop(robot: FakeWheelLeggedRobot, stop: dict, pose: dict[str, float], stop_time_s: float) -> dict:
    """Wheels brake at the deceleration limit to zero, legs crouch to `pose`, the arm holds, then damp.

    Returns what was measured: the largest wheel-command step [rad/s], and how many periods braking and the crouch took.
    """
    damp = robot.wait_for_state("stop", timeout=10 + stop_time_s, after=robot.states.index(stop), stop_phase="damp")
    assert damp["stopped_for_s"] >= stop_time_s, "the crouch takes stop_time_s (the node's clock) before the damping"
    time.sleep(3 * DT)
    # The commands from the last one before the stop on: stop["received"] is after the stop's first command was sent.
    times = robot.command_times("velocity")
    first = max(int(np.searchsorted(times, stop["received"])) - 3, 0)
    wheels = robot.command_array("velocity")[first:]
    legs_all = robot.command_array("position")[first:]
    assert np.isfinite(wheels).all() and np.isfinite(legs_all).all()
    steps = np.abs(np.diff(wheels, axis=0))
    limit = STOP_DECELERATION * DT
    assert steps.max() <= limit + 1e-9, f"a wheel command changed by {steps.max():.3f} rad/s in one period (limit {limit})"
    assert np.all(wheels[-1] == 0.0), "the wheels end at rest"
    first_stop = int(np.argmax(np.any(np.abs(wheels - WHEEL_SPEED) > 1e-6, axis=1)))  # the first braking command
    braking = int(np.argmax(np.all(wheels[first_stop:] == 0.0, axis=1))) + 1  # periods until the wheels are at rest
    assert braking >= WHEEL_SPEED / limit, "the wheels brake over many periods, never jump to zero"
    # Legs: monotonic toward the crouch pose until they reach it; the arm holds its stowed targets.
    legs = legs_all[:, : len(LEGS)]
    target = np.array([pose[n] for n in LEGS])
    at_pose = np.all(np.abs(legs - target) < 1e-6, axis=1)
    assert at_pose.any(), "the legs reach the crouch pose"
    reached = int(np.argmax(at_pose))
    crouching = legs[: reached + 1]
    direction = np.sign(target - legs[0])
    assert np.all(np.diff(crouching, axis=0) * direction >= -1e-9), "the legs move toward the crouch pose only"
    # Then damping: position targets follow the measured pose, which for this robot's ideal servos is a target it
    # was sent before (on a loaded machine a period or two late, so a damping target may repeat an earlier one).
    measured = [row for row in crouching]
    for row in legs[reached + 1:]:
        assert any(np.allclose(row, m, atol=1e-6) for m in measured), \
            f"a damping target {row} that is no pose the robot reported"
    np.testing.assert_allclose(legs_all[:, len(LEGS):], np.tile(TYPED.held_joints.targets, (len(legs_all), 1)), atol=1e-6,
                               err_msg="the stowed arm holds")
    crouch = int(np.argmax(np.all(np.abs(legs[first_stop:] - target) < 1e-6, axis=1))) + 1
    return {"max_wheel_step": round(float(steps.max()), 6), "braking_periods": braking, "crouch_periods": crouch}


# Start-up, outputs, cmd_vel, recording.


@pytest.mark.parametrize("reliability", ["reliable", "best_effort"])
def test_the_wl_policy_runs_on_imu_and_joint_states(tmp_path, reliability):
    """Waits for the IMU's orientation, then legs + arm go out as positions and the wheels as speeds; cmd_vel feeds
    lin_vel_x and ang_vel_z, the height keeps its default; the bag holds it all, odometry included."""
    interfaces = INTERFACES
    params = {"record": True, "record_dir": str(tmp_path / "bags"), "cmd_vel_timeout_s": 0.3}
    if reliability == "best_effort":  # the robot's own topics and orders, as for ros2_control's forward controllers
        interfaces = {"position": ("/forward_position_controller/commands", HELD + LEGS),
                      "velocity": ("/forward_velocity_controller/commands", WHEELS[::-1])}
        params.update({"command_topics.position": interfaces["position"][0], "command_joint_orders.position": HELD + LEGS,
                       "command_topics.velocity": interfaces["velocity"][0], "command_joint_orders.velocity": WHEELS[::-1]})
    robot_args = {"imu_has_orientation": False}  # REP-145: orientation_covariance[0] = -1, no orientation
    with wire(tmp_path, reliability, wait_for=None, interfaces=interfaces, robot_args=robot_args, **params) as (robot, node):
        robot.wait_for_state("passive", timeout=90, reason="never received sensor 'imu_quat'")
        response = robot.start()
        assert not response.success and "imu_quat from /imu (" in response.message, response.message
        assert "the IMU sends no orientation (orientation_covariance[0] = -1" in node.output
        robot.imu_has_orientation = True
        robot.wait_for_state("run", timeout=30)
        pos_order, vel_order = interfaces["position"][1], interfaces["velocity"][1]

        def last(kind: str, count: int = 5) -> np.ndarray:
            return wait_for_commands(robot, kind, count, since=time.monotonic())[-1]

        def as_dict(values, order) -> dict[str, float]:
            return dict(zip(order, values))

        position, velocity = last("position"), last("velocity")
        assert position.shape == (len(POSITION_JOINTS),) and velocity.shape == (len(WHEELS),)
        position, velocity = as_dict(position, pos_order), as_dict(velocity, vel_order)
        np.testing.assert_allclose([position[n] for n in LEGS], expected_legs(), atol=1e-6)
        np.testing.assert_allclose([position[n] for n in HELD], TYPED.held_joints.targets, atol=1e-6)
        np.testing.assert_allclose([velocity[n] for n in WHEELS], [WHEEL_SPEED] * 2, atol=1e-5)

        robot.twist = (0.5, 0.25)
        time.sleep(0.3)
        velocity, position = as_dict(last("velocity"), vel_order), as_dict(last("position"), pos_order)
        np.testing.assert_allclose([velocity[n] for n in WHEELS], [WHEEL_SCALE * 1.25, WHEEL_SCALE * 1.75], atol=1e-5)
        np.testing.assert_allclose([position[n] for n in LEGS], expected_legs(), atol=1e-6,
                                   err_msg="the height a Twist cannot carry keeps its default")
        robot.twist = None
        time.sleep(0.3 + 10 * DT)  # cmd_vel_timeout_s, then the default (standing still) again
        velocity = as_dict(last("velocity"), vel_order)
        np.testing.assert_allclose([velocity[n] for n in WHEELS], [WHEEL_SPEED] * 2, atol=1e-5)
        assert robot.state_names()[-1] == "run"

    from batonlab.logs.bag_reader import open_bag

    (bag,) = (tmp_path / "bags").iterdir()
    log = open_bag(bag)
    # The whole command vector in the bag, in the order it declares (the node's, whatever the outputs' orders).
    assert log.metadata["command_joint_names"] == COMMAND_JOINTS
    recorded = log.joint_commands.values[-1]
    np.testing.assert_allclose(recorded, [{**dict(zip(LEGS, expected_legs())), **dict(zip(WHEELS, [WHEEL_SPEED] * 2)),
                                           **dict(zip(HELD, TYPED.held_joints.targets))}[n] for n in COMMAND_JOINTS], atol=1e-5)
    offsets = np.cumsum([0] + [t.width for t in TYPED.obs_terms])
    c = offsets[[t.name for t in TYPED.obs_terms].index("command")]
    command_obs = log.policy_steps.observation[:, c:c + 3]
    ran = np.isfinite(command_obs).all(axis=1) & (np.abs(command_obs).sum(axis=1) > 0)
    assert ran.sum() > 20
    np.testing.assert_allclose(command_obs[ran, 2], HEIGHT, atol=1e-6, err_msg="the height is the default at every step")
    assert np.any(np.all(np.abs(command_obs[ran, :2] - [0.5, 0.25]) < 1e-6, axis=1)), "cmd_vel reached the observation"
    assert np.all(np.any(np.abs(command_obs[ran, :2] - [0.5, 0.25]) < 1e-6, axis=1)
                  | np.all(command_obs[ran, :2] == 0.0, axis=1)), "only cmd_vel or the default"
    odom = log.odom
    assert odom is not None and odom.t.size > 50 and odom.child_frame_id == "base" and odom.frame_id == "odom"
    np.testing.assert_allclose(odom.linear[-1], [0.25, 0.0, 0.0])
    np.testing.assert_allclose(odom.angular[-1], [0.0, 0.0, 0.1])
    assert log.imu is not None and log.imu.t.size > 50


# Stops: stale inputs, e-stop, NaN.


@pytest.mark.parametrize("silent", ["imu", "joint_states"])
def test_a_stale_input_brakes_the_wheels_and_crouches(tmp_path, silent):
    with wire(tmp_path) as (robot, node):
        time.sleep(0.3)
        seen = len(robot.states)
        if silent == "imu":
            robot.publish_imu = False
        else:
            robot.publish_joints = False
        stop = robot.wait_for_state("stop", timeout=10, after=seen)
        assert stop["reason"].startswith(f"stale {'imu_' if silent == 'imu' else 'joint_states'}"), stop["reason"]
        assert stop["stop_phase"] == "crouch"
        ticks = stop["ticks_since_imu" if silent == "imu" else "ticks_since_joint_states"]
        timeout_periods = math.ceil(stop["stale_timeout_s"] / DT - 1e-9)
        assert ticks <= timeout_periods + 3, f"stop {ticks} periods after the last {silent} (timeout {timeout_periods})"
        measured = check_stop(robot, stop, CROUCH, TYPED.stop.time_s)
        print(f"\n[wl stale {silent}] stop {ticks} periods after the last message (timeout {timeout_periods} periods); "
              f"{measured}")


@pytest.mark.parametrize("load", ["idle", "every_core_busy"])
def test_estop_latches_the_crouch_until_reset(tmp_path, load):
    """Under load the stale timeout is raised to 0.2 s (the robot thread itself is descheduled); the
    stop's guarantees hold per control period whatever the load. The stop pose and time come from parameters."""
    pose = {**CROUCH, "left_knee_pitch": 2.0, "right_knee_pitch": 2.0}
    params = {"stop_time_s": 0.6, "stop_pose.left_knee_pitch": 2.0, "stop_pose.right_knee_pitch": 2}
    if load != "idle":
        params["stale_timeout_s"] = 0.2
    with CpuLoad() if load != "idle" else contextlib.nullcontext(), wire(tmp_path, **params) as (robot, node):
        time.sleep(0.3)
        seen = len(robot.states)
        robot.estop(True)
        stop = robot.wait_for_state("stop", timeout=10, after=seen)
        assert stop["reason"] == "e-stop" and stop["estop_latched"] and stop["stop_phase"] == "crouch", stop
        measured = check_stop(robot, stop, pose, 0.6)
        print(f"\n[wl e-stop, {load}] {measured}")
        response = robot.reset()
        assert not response.success and "e-stop" in response.message, "reset is refused while the e-stop is on"
        robot.estop(False)
        time.sleep(5 * DT)
        assert robot.state_names()[-1] == "stop", "releasing the e-stop does not leave stop"
        seen = len(robot.states)
        assert robot.reset().success
        robot.wait_for_state("passive", timeout=10, after=seen)
        robot.wait_for_state("run", timeout=10, after=seen)
        assert np.isfinite(robot.command_array("position")).all() and np.isfinite(robot.command_array("velocity")).all()


def test_nan_in_the_imu_never_reaches_a_command_topic(tmp_path):
    with wire(tmp_path) as (robot, node):
        for field, bad in (("imu_orientation", [float("nan"), 0.0, 0.0, 0.0]), ("imu_gyro", [0.0, float("nan"), 0.0])):
            time.sleep(0.2)
            seen = len(robot.states)
            good = getattr(robot, field)
            setattr(robot, field, bad)
            stop = robot.wait_for_state("stop", timeout=10, after=seen)
            sensor = "imu_quat" if field == "imu_orientation" else "imu_gyro"
            assert stop["reason"] == f"non-finite {sensor}", stop["reason"]
            time.sleep(10 * DT)
            setattr(robot, field, good)
            seen = len(robot.states)
            assert robot.reset().success
            robot.wait_for_state("run", timeout=10, after=seen)
        for kind in ("position", "velocity"):
            commands = robot.command_array(kind)
            assert len(commands) > 50 and np.isfinite(commands).all(), f"a non-finite {kind} command was sent"
        assert "non-finite imu orientation" in node.output and "non-finite imu angular_velocity" in node.output


# Configurations that cannot work.


@pytest.mark.parametrize("params, message", [
    ({"output": "trajectory"}, "sends positions only"),
    ({"command_joint_orders.velocity": ["left_wheel"]}, "command_joint_orders.velocity ['left_wheel'] must be a permutation"),
    ({"command_joint_order": LEGS + WHEELS}, "set command_joint_orders.<interface>"),
    ({"stop_pose.left_wheel_typo": 0.1}, "stop_pose names joints ['left_wheel_typo']"),
])
def test_outputs_that_cannot_work_refuse_to_start(tmp_path, params, message):
    weight, bias = linear_policy()
    export = make_export(tmp_path / "exported", MANIFEST, weight, bias)
    node = NodeProcess("policy_node", new_domain_id(), tmp_path, params={"manifest": str(export), **params})
    try:
        code = node.wait(timeout=90)
    finally:
        node.stop()
    assert code == 2 and message in node.output and "Traceback" not in node.output, node.output
