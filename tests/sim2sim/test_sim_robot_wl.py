# SPDX-License-Identifier: BSD-3-Clause
"""The wheel-legged robot as a ROS 2 robot: `SimRobot` / `sim_robot_node` of wl_velocity.

In-process: its command interfaces (legs and the held arm on position servos, wheels on velocity
servos), driven through the training actuators; its IMU (the scene's imu_quat / imu_gyro / imu_acc,
optionally with the policy's training noise) and odometry (twist in the body frame).

Over real DDS (the node in a child process on its own ROS_DOMAIN_ID, Fast DDS on loopback, an rclpy
client in the test process): commands per interface on joint_commands/position and
joint_commands/velocity, bad messages dropped, and what the node publishes (imu, odom, cmd_vel,
/clock, episode results with the mean speed error) in the stated conventions.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from batonlab.observations.root_state import root_ang_vel_b, root_lin_vel_b, root_lin_vel_w, root_pos_w, root_quat_w
from batonlab import observations
from batonlab.cli.deploy import node_command, ros_environment
from batonlab.cli.ros_packages import find_package
from batonlab.robots import wheel_legged as wl
from batonlab.tasks import make_task_cfg
from ros.nodes import DdsPeer

DEPLOY_ROS_PATH = str(find_package("deploy_ros").python_path)
if DEPLOY_ROS_PATH not in sys.path:
    sys.path.insert(0, DEPLOY_ROS_PATH)
from batonlab.sim2sim.robot import SimRobot  # noqa: E402

TASK = "wl_velocity"
POSITION_JOINTS = [*wl.LEG_JOINTS, *wl.arm_joints()]
"""The position interface: the policy's legs (task order), then the held arm."""
HOME = wl.home_pose(with_arm=True)


@pytest.fixture
def robot():
    threads = torch.get_num_threads()  # SimRobot runs its world on one thread
    robot = SimRobot(TASK, seed=7)
    robot.next_episode()  # episode 0 (seed 7): on the ground, free (before it the robot hangs from its stand)
    yield robot
    robot.close()
    torch.set_num_threads(threads)


def lift(robot: SimRobot, height: float = 3.0) -> None:
    """Put the robot `height` above where it stands, at rest, so that nothing but its servos moves its joints."""
    env = robot.env
    qpos = env.sim.qpos.clone()
    qpos[0, 2] += height
    env.sim.reset(torch.tensor([0]), qpos, torch.zeros_like(env.sim.qvel))


def run(robot: SimRobot, seconds: float) -> None:
    for _ in range(round(seconds / robot.physics_dt)):
        robot.step()


def joint(robot: SimRobot, name: str) -> tuple[float, float]:
    pos, vel = robot.joint_state()
    k = robot.joint_names.index(name)
    return float(pos[k]), float(vel[k])


def rotation(quat_wxyz) -> np.ndarray:
    """Rotation matrix (frame → world) of a wxyz quaternion (numpy, independent of the training code)."""
    w, x, y, z = quat_wxyz
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def projected_gravity(quat_wxyz) -> np.ndarray:
    """Gravity direction in the frame of `quat_wxyz`."""
    return rotation(quat_wxyz).T @ np.array([0.0, 0.0, -1.0])


# In-process: commands through the training actuators.


def test_interfaces_group_the_commandable_joints_by_actuator_kind(robot):
    assert robot.interfaces == {"position": POSITION_JOINTS, "velocity": list(wl.WHEEL_JOINTS)}
    assert robot.held_joints == list(make_task_cfg(TASK).deploy.held_joints) == list(wl.arm_joints())
    targets = dict(zip(robot.command_joints, robot.targets.tolist()))
    assert targets == pytest.approx({**{j: HOME[j] for j in POSITION_JOINTS}, "left_wheel": 0.0, "right_wheel": 0.0})


def test_held_arm_joints_take_targets_and_return_to_the_default_pose_each_episode(robot):
    lift(robot)
    robot.set_targets(["shoulder_yaw", "elbow_pitch"], [0.5, 1.8])
    run(robot, 0.5)
    assert joint(robot, "shoulder_yaw")[0] == pytest.approx(0.5, abs=0.03)
    assert joint(robot, "elbow_pitch")[0] == pytest.approx(1.8, abs=0.03)
    arm = robot.env.scene.actuator_for_joints(["shoulder_yaw", "elbow_pitch"])
    assert robot.env.sim.ctrl[0, arm].tolist() == pytest.approx([0.5, 1.8])

    robot.next_episode()  # as the task's hold event does in training: back to the stowed pose
    run(robot, 0.3)
    assert robot.env.sim.ctrl[0, arm].tolist() == pytest.approx([HOME["shoulder_yaw"], HOME["elbow_pitch"]])
    assert joint(robot, "elbow_pitch")[0] == pytest.approx(HOME["elbow_pitch"], abs=0.05)


def test_legs_and_wheels_follow_position_and_velocity_targets_through_their_servos(robot):
    """In the air, legs reach their position targets and wheels turn at their speed targets: the
    targets are actuator controls (clamped to the ctrlrange, as training's action terms do), never
    joint velocities written into the state."""
    lift(robot)
    robot.set_targets(["left_hip_pitch", "left_wheel", "right_wheel"], [0.3, 5.0, -3.0])
    robot.step()
    assert 0.0 < joint(robot, "left_wheel")[1] < 4.0, "one physics step in, the wheel is still spinning up"
    run(robot, 0.4)
    actuators = robot.env.scene.actuator_for_joints(["left_hip_pitch", "left_wheel", "right_wheel"])
    assert robot.env.sim.ctrl[0, actuators].tolist() == pytest.approx([0.3, 5.0, -3.0])
    assert joint(robot, "left_hip_pitch")[0] == pytest.approx(0.3, abs=0.08)  # its servo holds it against its weight
    # Within the speed a velocity servo loses to its bearing damping (its gain is randomised per episode).
    assert joint(robot, "left_wheel")[1] == pytest.approx(5.0, abs=0.2)
    assert joint(robot, "right_wheel")[1] == pytest.approx(-3.0, abs=0.2)

    wheels = robot.env.scene.actuator_for_joints(list(wl.WHEEL_JOINTS))
    robot.set_targets(["left_wheel", "right_wheel"], [100.0, -100.0])
    robot.step()
    assert robot.env.sim.ctrl[0, wheels].tolist() == [30.0, -30.0], "wheel speed targets clamp to the ctrlrange"


def test_before_episode_0_the_robot_hangs_from_a_stand_that_the_imu_feels():
    """The warm-up (the policy's soft start) happens on a stand, as a real wheel-legged robot is started
    from a gantry; episode 0 then starts from its seed's initial state, free."""
    robot = SimRobot(TASK, seed=7)
    try:
        start = robot.base_motion()
        robot.set_targets(["left_wheel", "right_wheel"], [10.0, 10.0])
        run(robot, 2.0)
        held = robot.base_motion()
        assert np.abs(held.position - start.position).max() < 0.03 and np.abs(held.linear_velocity).max() < 0.05
        imu = robot.imu()
        # The stand carries the robot, so the accelerometer reads gravity's reaction (not free fall's zero).
        np.testing.assert_allclose(imu.linear_acceleration, -9.81 * projected_gravity(imu.orientation), atol=1.5)
        assert joint(robot, "left_wheel")[1] == pytest.approx(10.0, abs=0.2), "the joints move freely on the stand"
        robot.next_episode()
        assert float(robot.env.sim.xfrc_applied.abs().max()) == 0.0
        dropped_from = robot.base_motion().position[2]
        run(robot, 0.5)
        assert robot.base_motion().position[2] < dropped_from - 0.01, "free of the stand, the robot drops to the ground"
    finally:
        robot.close()


# In-process: IMU and odometry.


def test_imu_is_the_scene_imu_sensors(robot):
    run(robot, 0.1)
    imu = robot.imu()
    assert imu.frame_id == "imu"
    np.testing.assert_array_equal(imu.orientation, robot.sensor("imu_quat"))
    np.testing.assert_array_equal(imu.angular_velocity, robot.sensor("imu_gyro"))
    np.testing.assert_array_equal(imu.linear_acceleration, robot.sensor("imu_acc"))
    # The orientation is the IMU frame in the world: its projected gravity is the policy's input.
    training = observations.projected_gravity(robot.env, "imu_quat")[0].double().numpy()
    np.testing.assert_allclose(projected_gravity(imu.orientation), training, atol=1e-6)


def test_imu_noise_is_the_policy_observation_noise(robot):
    """σ of the gyro term (0.2 rad/s) on each gyro axis; a rotation of σ = 0.05 rad per axis, which moves
    the projected gravity by 0.05 per axis across gravity like the projected_gravity term's noise."""
    terms = make_task_cfg(TASK, play=True).observations["policy"].terms
    assert robot.imu_noise_std == (terms["projected_gravity"].noise_std, terms["base_ang_vel"].noise_std) == (0.05, 0.2)
    clean = robot.imu()
    rng = np.random.default_rng(0)
    noisy = [robot.imu(rng) for _ in range(4000)]
    gyro = np.array([r.angular_velocity for r in noisy]) - clean.angular_velocity
    np.testing.assert_allclose(gyro.std(axis=0), 0.2, rtol=0.05)
    assert np.abs(gyro.mean(axis=0)).max() < 0.015
    quats = np.array([r.orientation for r in noisy])
    np.testing.assert_allclose(np.linalg.norm(quats, axis=1), 1.0, atol=1e-9)
    gravity = np.array([projected_gravity(q) for q in quats]) - projected_gravity(clean.orientation)
    assert abs(projected_gravity(clean.orientation)[2] + 1.0) < 0.02, "upright at the start of the episode"
    np.testing.assert_allclose(gravity[:, :2].std(axis=0), 0.05, rtol=0.08)
    assert gravity[:, 2].std() < 0.005, "a rotation cannot lengthen the gravity vector"
    again = robot.imu(np.random.default_rng(0))
    np.testing.assert_array_equal(again.angular_velocity, noisy[0].angular_velocity)


def test_odometry_twist_is_in_the_body_frame(robot):
    run(robot, 0.05)
    motion = robot.base_motion()
    env = robot.env
    np.testing.assert_array_equal(motion.position, root_pos_w(env)[0].double().numpy())
    np.testing.assert_array_equal(motion.orientation, root_quat_w(env)[0].double().numpy())
    np.testing.assert_allclose(motion.linear_velocity, root_lin_vel_b(env)[0].double().numpy(), atol=1e-6)
    np.testing.assert_array_equal(motion.angular_velocity, root_ang_vel_b(env)[0].double().numpy())
    world = root_lin_vel_w(env)[0].double().numpy()
    assert np.linalg.norm(world - motion.linear_velocity) > 0.05, "seed 7 faces away from x: the frames differ"


def test_a_fixed_command_field_holds_in_every_episode(robot):
    layout = robot.env.observation_manager.layout["policy"]
    names = [t.name for t in layout]
    height_column = sum(t.size * max(1, t.history_length) for t in layout[:names.index("command")]) + 2
    robot.fix_command_field("base_velocity", "height", 0.4)
    drawn = set()
    for _ in range(3):
        robot.next_episode()
        command = robot.command("base_velocity")
        drawn.add(round(float(command[0]), 6))
        assert command[2] == pytest.approx(0.4)
        assert robot.env.obs["policy"][0, height_column].item() == pytest.approx(0.4), "the policy observes it"
    assert len(drawn) == 3, "the speeds are still drawn"


def test_twist_carries_the_command_fields_it_has_and_defaults_fill_the_rest():
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from deploy_ros.messages import command_to_twist, twist_to_command

    fields = ("lin_vel_x", "ang_vel_z", "height")
    twist = command_to_twist(fields, [0.7, -0.3, 0.4])
    assert (twist.linear.x, twist.linear.y, twist.linear.z) == (0.7, 0.0, 0.0)
    assert (twist.angular.x, twist.angular.y, twist.angular.z) == (0.0, 0.0, -0.3)
    assert twist_to_command(twist, fields, (0.0, 0.0, 0.463)) == [0.7, -0.3, 0.463]
    assert twist_to_command(command_to_twist(("lin_vel_x", "lin_vel_y", "ang_vel_z"), [1, 2, 3]),
                            ("ang_vel_z", "lin_vel_y", "lin_vel_x"), None) == [3.0, 2.0, 1.0]
    with pytest.raises(ValueError, match="cannot carry the command field 'height'"):
        twist_to_command(twist, fields, None)


# Over DDS: sim_robot_node in a child process, an rclpy client here.


class Client(DdsPeer):
    """An rclpy node on the test's domain, spinning in a thread: records messages, publishes commands."""

    def __init__(self, domain_id: int, topics: dict[str, type]):
        from rclpy.qos import QoSProfile, ReliabilityPolicy

        self._open_node(domain_id, "sim_robot_client")
        self.messages: dict[str, list] = {topic: [] for topic in topics}
        qos = QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE)
        for topic, msg_type in topics.items():
            self.node.create_subscription(msg_type, topic, lambda msg, topic=topic: self._record(topic, msg), qos)
        self._spin_in_background()

    def _record(self, topic: str, msg) -> None:
        with self.lock:
            self.messages[topic].append(msg)

    def received(self, topic: str) -> list:
        with self.lock:
            return list(self.messages[topic])


def stamp_s(msg) -> float:
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


def stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec


def test_commands_per_interface_over_dds(tmp_path):
    """joint_commands/position (11 joints) and joint_commands/velocity (the wheels, here in the order
    the parameter gives) move the robot's legs, arm and wheels; a velocity command of the wrong width
    or with a NaN is dropped; a JointTrajectory drives a position joint and never a wheel."""
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from sensor_msgs.msg import JointState
    from std_msgs.msg import Float64MultiArray
    from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

    from ros.nodes import NodeProcess, new_domain_id

    domain = new_domain_id()
    node = NodeProcess("sim_robot_node", domain, tmp_path, params={
        "task": TASK, "seed": 7, "warmup_s": 1e9, "command_joint_orders.velocity": ["right_wheel", "left_wheel"]})
    client = Client(domain, {"joint_states": JointState})
    position = client.node.create_publisher(Float64MultiArray, "joint_commands/position", 10)
    velocity = client.node.create_publisher(Float64MultiArray, "joint_commands/velocity", 10)
    trajectory = client.node.create_publisher(JointTrajectory, "joint_trajectory", 10)
    try:
        def sim_time() -> float:
            states = client.received("joint_states")
            return stamp_s(states[-1]) if states else -1.0

        def hold(seconds: float, send) -> dict[str, float]:
            """Send commands every 20 ms for `seconds` of simulated time; the mean joint state of its last 0.3 s."""
            start, deadline = sim_time(), time.monotonic() + 60 + 20 * seconds
            while sim_time() < start + seconds:
                assert time.monotonic() < deadline and node.process.poll() is None, f"the simulator stalled:\n{node.output}"
                send()
                time.sleep(0.02)
            states = client.received("joint_states")  # one copy: the window's end is its newest stamp
            window = [m for m in states if stamp_s(m) > stamp_s(states[-1]) - 0.3]
            names = list(window[0].name)
            pos, vel = np.mean([m.position for m in window], axis=0), np.mean([m.velocity for m in window], axis=0)
            return {**{j: pos[names.index(j)] for j in names}, **{f"{j}/vel": vel[names.index(j)] for j in names}}

        def array(values) -> Float64MultiArray:
            return Float64MultiArray(data=[float(v) for v in values])

        deadline = time.monotonic() + 120
        while sim_time() < 1.0 or not (position.get_subscription_count() and velocity.get_subscription_count()
                                       and trajectory.get_subscription_count()):
            assert time.monotonic() < deadline and node.process.poll() is None, f"no joint states:\n{node.output}"
            time.sleep(0.1)
        # The robot has fallen (no one balances it): the legs and arm move against their own weight only.
        pose = {**{j: HOME[j] for j in POSITION_JOINTS}, "left_hip_pitch": 0.5, "shoulder_yaw": 0.6}
        send_pose = lambda: position.publish(array([pose[j] for j in POSITION_JOINTS]))  # noqa: E731
        state = hold(1.5, lambda: (send_pose(), velocity.publish(array([0.0, 0.0]))))
        assert state["left_hip_pitch"] == pytest.approx(0.5, abs=0.2), state
        assert state["shoulder_yaw"] == pytest.approx(0.6, abs=0.2), state

        state = hold(1.5, lambda: (send_pose(), velocity.publish(array([-6.0, 6.0]))))  # (right, left)
        assert state["left_wheel/vel"] > 3.5 and state["right_wheel/vel"] < -3.5, state
        # One message at a time: the node keeps only the latest message of a topic (queue depth 1).
        bad = itertools.cycle([array([6.0, -6.0, 0.0]), array([math.nan, -6.0]), array([6.0, math.inf])])
        state = hold(1.0, lambda: (send_pose(), velocity.publish(next(bad))))
        assert state["left_wheel/vel"] > 3.5 and state["right_wheel/vel"] < -3.5, f"a bad command was applied: {state}"
        state = hold(1.5, lambda: (send_pose(), velocity.publish(array([6.0, -6.0]))))
        assert state["left_wheel/vel"] < -3.5 and state["right_wheel/vel"] > 3.5, state

        def send_trajectory(names, positions):
            msg = JointTrajectory(joint_names=names, points=[JointTrajectoryPoint(positions=positions)])
            trajectory.publish(msg)

        state = hold(1.0, lambda: (send_trajectory(["shoulder_yaw"], [-0.5]), velocity.publish(array([6.0, -6.0]))))
        assert state["shoulder_yaw"] == pytest.approx(-0.5, abs=0.2), state
        state = hold(0.5, lambda: (send_trajectory(["left_wheel"], [0.0]), velocity.publish(array([6.0, -6.0]))))
        assert state["left_wheel/vel"] < -3.5, "a trajectory cannot command a wheel"
    finally:
        client.close()
        code = node.stop()
    output = node.output  # complete once the node has exited
    assert code == 0 and "Traceback" not in output, output
    assert "dropped a velocity command of 3 values, expected 2" in output
    assert "received a non-finite joint command" in output
    assert "dropped a joint trajectory for ['left_wheel']" in output


def test_imu_odometry_cmd_vel_clock_and_episodes_over_dds(tmp_path):
    """sim_robot_node of wl_velocity with `cmd_vel_command:=base_velocity`, driven by zero wheel speeds
    (legs and arm at their default targets), for three episodes:

    - imu: frame "imu"; MuJoCo computes sensors at the start of a physics step, so the IMU of step t
      is the root body's motion of step t-1 (the IMU site is not rotated on the body): its orientation
      is the odometry's orientation, its angular velocity the odometry's angular velocity, in the
      body frame; its linear acceleration is the specific force (the odometry's acceleration minus
      gravity, +9.81 m/s² up at rest) in the IMU frame;
    - odom: frame "odom", child "base", twist in the body frame: the velocity the positions integrate
      (implicit Euler: p(t) - p(t-dt) = dt·v(t)), rotated into the body;
    - cmd_vel: the command's lin_vel_x and ang_vel_z; its height, which a Twist cannot carry, fixed
      at the command's default (0.463 m) in commands/base_velocity;
    - /clock: the stamps' simulated time, one physics step (5 ms) at a time;
    - episodes: what the in-process sim robot reports for a robot holding still with the height fixed,
      mean speed error included (and its mean in the results file).
    """
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from geometry_msgs.msg import PointStamped, Twist
    from nav_msgs.msg import Odometry
    from rosgraph_msgs.msg import Clock
    from sensor_msgs.msg import Imu
    from std_msgs.msg import Float64MultiArray, String

    from ros.nodes import NodeProcess, new_domain_id
    from ros.training import hold_still, sim_robot_on_seeds

    domain, seeds = new_domain_id(), range(100, 103)
    results_file = tmp_path / "results.json"
    node = NodeProcess("sim_robot_node", domain, tmp_path, params={
        "task": TASK, "seed": seeds[0], "num_episodes": len(seeds), "warmup_s": 0.2, "results_file": str(results_file),
        "exit_when_done": False, "cmd_vel_command": "base_velocity"})
    topics = {"imu": Imu, "odom": Odometry, "cmd_vel": Twist, "commands/base_velocity": PointStamped, "/clock": Clock,
              "/sim_robot_node/episode": String}
    client = Client(domain, topics)
    velocity = client.node.create_publisher(Float64MultiArray, "joint_commands/velocity", 10)
    try:
        deadline = time.monotonic() + 180
        while not all(client.received(t) for t in ("imu", "odom", "cmd_vel", "/clock")):
            assert time.monotonic() < deadline and node.process.poll() is None, f"nothing published:\n{node.output}"
            time.sleep(0.1)
        while len(client.received("/sim_robot_node/episode")) < len(seeds):
            assert time.monotonic() < deadline and node.process.poll() is None, f"the episodes did not end:\n{node.output}"
            velocity.publish(Float64MultiArray(data=[0.0, 0.0]))
            time.sleep(0.05)
        while not results_file.exists():
            assert time.monotonic() < deadline, f"no results file:\n{node.output}"
            time.sleep(0.1)
    finally:
        client.close()
        code = node.stop()
    assert code == 0 and "Traceback" not in node.output, node.output

    # Episodes, as the in-process sim robot (and play) end and judge them.
    episodes = [json.loads(m.data) for m in client.received("/sim_robot_node/episode")]
    summary = json.loads(results_file.read_text())
    assert episodes == summary["episodes"] and [e["seed"] for e in episodes] == list(seeds)
    expected = sim_robot_on_seeds(TASK, hold_still(TASK), seeds, fixed_fields={"base_velocity": {"height": 0.463}})
    assert [e["length"] for e in episodes] == expected.lengths.tolist()
    errors = np.array([e["mean_speed_error"] for e in episodes])
    np.testing.assert_allclose(errors, expected.speed_errors, atol=1e-4)
    assert summary["mean_speed_error"] == pytest.approx(errors.mean())
    print(f"\n[sim_robot_wl] over DDS: lengths {[e['length'] for e in episodes]}, mean speed errors {errors.round(4).tolist()}")

    # Frames and the IMU/odometry relations, on consecutive physics steps within an episode.
    imu = {stamp_ns(m): m for m in client.received("imu")}
    odom = {stamp_ns(m): m for m in client.received("odom")}
    assert {m.header.frame_id for m in imu.values()} == {"imu"}
    assert {(m.header.frame_id, m.child_frame_id) for m in odom.values()} == {("odom", "base")}
    dt_ns = 5_000_000
    checked, moving_and_turned, residuals = 0, 0, []
    for t, now in odom.items():
        before = odom.get(t - dt_ns)
        if before is None or t not in imu:
            continue
        p0, p1 = (np.array([m.pose.pose.position.x, m.pose.pose.position.y, m.pose.pose.position.z]) for m in (before, now))
        q0, q1 = (np.array([m.pose.pose.orientation.w, m.pose.pose.orientation.x, m.pose.pose.orientation.y,
                            m.pose.pose.orientation.z]) for m in (before, now))
        if np.linalg.norm(p1 - p0) > 0.05 or abs(np.dot(q0, q1)) < 0.995:
            continue  # an episode reset between the two steps
        sensed = imu[t]
        q_imu = np.array([sensed.orientation.w, sensed.orientation.x, sensed.orientation.y, sensed.orientation.z])
        np.testing.assert_allclose(q_imu, q0, atol=1e-6)
        gyro = np.array([sensed.angular_velocity.x, sensed.angular_velocity.y, sensed.angular_velocity.z])
        w0 = np.array([before.twist.twist.angular.x, before.twist.twist.angular.y, before.twist.twist.angular.z])
        np.testing.assert_allclose(gyro, w0, atol=1e-5)
        v_world = (p1 - p0) / 0.005
        v_body = np.array([now.twist.twist.linear.x, now.twist.twist.linear.y, now.twist.twist.linear.z])
        np.testing.assert_allclose(v_body, rotation(q1).T @ v_world, atol=5e-3)
        # Specific force: the acceleration of the step the IMU saw, minus gravity, in the IMU frame (the
        # site sits 2 cm above the body origin: its rotational acceleration is the residual).
        v0 = rotation(q0) @ [before.twist.twist.linear.x, before.twist.twist.linear.y, before.twist.twist.linear.z]
        specific_force = rotation(q0).T @ ((rotation(q1) @ v_body - v0) / 0.005 + [0.0, 0.0, 9.81])
        acc = [sensed.linear_acceleration.x, sensed.linear_acceleration.y, sensed.linear_acceleration.z]
        residuals.append(np.linalg.norm(acc - specific_force))
        checked += 1
        moving_and_turned += np.linalg.norm(v_body - v_world) > 0.05
    assert checked > 100 and moving_and_turned > 10, (checked, moving_and_turned)
    residuals = np.array(residuals)
    assert np.median(residuals) < 0.4 and np.percentile(residuals, 75) < 0.8, np.percentile(residuals, [50, 75, 90])
    print(f"[sim_robot_wl] {checked} consecutive imu/odom pairs ({moving_and_turned} where body and world velocity "
          f"differ); specific force residual median {np.median(residuals):.3f} m/s²")

    # cmd_vel carries the command's speed and yaw rate; the height stays at the command's default.
    commands = client.received("commands/base_velocity")
    assert {round(m.point.z, 6) for m in commands} == {0.463}
    drawn = {(round(m.point.x, 6), round(m.point.y, 6)) for m in commands}
    twists = client.received("cmd_vel")
    sent = {(round(m.linear.x, 6), round(m.angular.z, 6)) for m in twists}
    assert sent <= drawn and len(sent) >= len(seeds), (sent, drawn)
    print(f"[sim_robot_wl] cmd_vel (lin_vel_x, ang_vel_z): {sorted(sent)}")
    assert all(m.linear.y == m.linear.z == m.angular.x == m.angular.y == 0.0 for m in twists)

    # /clock: simulated time, physics step by physics step, the time of the stamps.
    clock = np.array([m.clock.sec * 10**9 + m.clock.nanosec for m in client.received("/clock")])
    assert (np.diff(clock) > 0).all() and (clock % dt_ns == 0).all()
    inside = [t for t in imu if clock[0] <= t <= clock[-1]]
    assert len(set(inside) & set(clock.tolist())) >= 0.9 * len(inside) > 100, "the stamps are the simulated time"


def test_bad_configurations_exit_2_in_one_line():
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from ros.nodes import new_domain_id

    cases = {
        "cmd_vel_command 'base_velocty' is not a command of the task ['base_velocity']": {"cmd_vel_command": "base_velocty"},
        "command_joint_orders.velocity names joints ['tail'] that are not the robot's velocity joints "
        "['left_wheel', 'right_wheel']": {"command_joint_orders.velocity": ["left_wheel", "tail"]},
        "the robot has several command interfaces ['position', 'velocity']": {"command_joint_order": ["left_wheel"]},
    }
    processes = {expected: subprocess.Popen(node_command("sim_robot_node", params={"task": TASK, **params}),
                                            env=ros_environment(new_domain_id()), stdout=subprocess.PIPE,
                                            stderr=subprocess.PIPE, text=True)
                 for expected, params in cases.items()}
    for expected, process in processes.items():
        _, stderr = process.communicate(timeout=300)
        assert process.returncode == 2, stderr
        assert "Traceback" not in stderr
        lines = [line for line in stderr.splitlines() if line.startswith("[sim_robot_node]")]
        assert lines == [f"[sim_robot_node] refusing to start: {lines[0].split(': ', 1)[1]}"] and expected in lines[0], stderr
