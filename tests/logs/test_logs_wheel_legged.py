# SPDX-License-Identifier: BSD-3-Clause
"""Record and replay the wheel-legged robot: a `policy_node`-style bag of `wl_velocity` with odometry.

The bag is written the way `policy_node` writes it while `sim_robot_node` plays the robot: the sim
robot (`batonlab.sim2sim.robot.SimRobot`) steps one physics step at a time and its joint states, IMU and
odometry (REP-105: twist in the base frame) are recorded at the physics rate; once per control period
a policy acts on the observation (the env's own, in-process) and the robot's command vector (leg
positions, wheel velocities, then the held arm's targets) is recorded as joint commands and a policy
step, with the metadata keys `policy_node._open_recorder` writes plus the sim robot's physics
parameters. The policy is a linear ONNX export of the real wl_velocity manifest
(`tests.ros.exports.make_export`): a hand-tuned balance controller that drives the robot ~1.3 m in
2 s, so the replay's base drift is measured on a base that really moves.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from batonlab.cli.ros_packages import find_package
from batonlab.cli.main import main
from batonlab.deploy import load_manifest
from batonlab.deploy.actions import ActionProcessor
from batonlab.deploy.manifest import Manifest, sha256_file
from batonlab.deploy.recording import BagRecorder
from batonlab.export.manifest import manifest_from_env
from batonlab.logs.bag_reader import open_bag
from batonlab.logs.open_loop import is_jump
from batonlab.logs.replay import reevaluate_policy, replay_open_loop
from batonlab.tasks.replay import replay_env_for, replay_open_loop_for
from batonlab.logs.sim_recorder import world_params
from batonlab.robots import wheel_legged as wl
from ros.exports import make_export

DEPLOY_ROS_PATH = str(find_package("deploy_ros").python_path)
if DEPLOY_ROS_PATH not in sys.path:
    sys.path.insert(0, DEPLOY_ROS_PATH)
from batonlab.sim2sim.robot import SimRobot  # noqa: E402

TASK = "wl_velocity"
SEED = 1
"""Episode seed of the sim robot (initial state, randomised physics); the controller keeps it up for `DURATION_S`."""
DURATION_S = 2.0
COMMAND = (0.5, 0.3)
"""Forward speed [m/s] and yaw rate [rad/s] commanded during the recording."""


def balance_policy(manifest: Manifest) -> tuple[np.ndarray, np.ndarray]:
    """(weight (obs_dim, action_dim), bias) of a linear policy that balances the robot on its wheels.

    Legs hold the default pose (zero leg actions). The wheels' velocity target integrates, through
    the `last_action` input, an acceleration that leans against the tilt (projected gravity x), its
    rate (gyro y) and the speed error (wheel speeds vs. the commanded speed): an inverted pendulum on
    a velocity-controlled base. A yaw-rate command splits the wheel speeds.
    """
    start, offset = {}, 0
    for term in manifest.obs_terms:
        assert term.history_length == 0
        start[term.name] = offset
        offset += term.size
    joints = list(manifest.joint_names)
    wheels = [joints.index(w) for w in wl.WHEEL_JOINTS]
    wheel_scale = float(manifest.action_scale[wheels[0]])  # rad/s per action unit
    vel_obs_scale = next(t.scale for t in manifest.obs_terms if t.name == "wheel_vel")
    weight, bias = np.zeros((manifest.obs_dim, manifest.action_dim)), np.zeros(manifest.action_dim)
    for side, w in zip((-1.0, 1.0), wheels):
        for other in wheels:
            weight[start["last_action"] + other, w] = 0.5  # integrator of the common wheel speed
            weight[start["wheel_vel"] + wheels.index(other), w] = 0.05 / 2
        weight[start["projected_gravity"] + 0, w] = 0.5
        weight[start["base_ang_vel"] + 1, w] = 0.4
        weight[start["command"] + 0, w] = -0.05 * vel_obs_scale / wl.WHEEL_RADIUS
        weight[start["command"] + 1, w] = side * 0.16 * 8.0 / wheel_scale
        bias[w] = 0.02
    return weight, bias


@dataclass
class Recording:
    bag: Path
    export_dir: Path
    manifest: Manifest
    base_lin_vel_w: np.ndarray
    """(N, 3) the free joint's linear velocity at each odometry sample (world frame) [m/s]."""


def _rotate_inverse(quat: np.ndarray, vec: np.ndarray) -> np.ndarray:
    out = np.zeros(3)
    neg = np.zeros(4)
    mujoco.mju_negQuat(neg, quat)
    mujoco.mju_rotVecQuat(out, vec, neg)
    return out


def record_wl_bag(out: Path) -> Recording:
    """A `policy_node` bag of the sim robot driven by `balance_policy` for `DURATION_S`."""
    robot = SimRobot(TASK, seed=SEED)
    env = robot.env
    try:
        env_manifest = manifest_from_env(env, TASK)
        weight, bias = balance_policy(env_manifest)
        export_dir = make_export(out / "export", env_manifest, weight, bias)
        manifest = load_manifest(export_dir)
        process = ActionProcessor(manifest)
        w, b = torch.as_tensor(weight, dtype=torch.float32), torch.as_tensor(bias, dtype=torch.float32)
        robot.next_episode()
        command = env.command_manager.terms["base_velocity"]
        command.fix_field("lin_vel_x", COMMAND[0])
        command.fix_field("ang_vel_z", COMMAND[1])
        metadata = {  # the keys policy_node._open_recorder writes, and the sim robot's physics parameters
            "source": "policy_node", "task": TASK, "robot": "wheel_legged", "seed": SEED,
            "manifest_sha256": sha256_file(export_dir / "manifest.json"), "manifest_source": "export",
            "export_dir": str(export_dir.resolve()), "manifest": {k: v for k, v in manifest.to_json().items()
                                                                 if k != "training_config"},
            "control_dt": robot.control_dt, "use_sim_time": True, "physics": world_params(env, 0),
        }
        # policy_node's command vector: the policy's joints, then the joints it holds (the stowed arm).
        joints = [*manifest.joint_names, *manifest.held_joints.names]
        held = np.array(manifest.held_joints.targets)
        recorder = BagRecorder(out / "bag", metadata, manifest.joint_names, joints)
        t0_ns, lin_vel_w = 1_000_000_000, []

        def now_ns() -> int:
            return t0_ns + round(robot.physics_steps * robot.physics_dt * 1e9)

        def record_state() -> None:
            stamp = now_ns()
            pos, vel = robot.joint_state()
            recorder.joint_state(stamp, pos, vel, names=tuple(robot.joint_names), header_ns=stamp)
            qpos, qvel = env.sim.qpos[0].double().numpy(), env.sim.qvel[0].double().numpy()
            quat = qpos[3:7]
            recorder.imu(stamp, quat, qvel[3:6], _rotate_inverse(quat, np.array([0.0, 0.0, 9.81])), frame_id="base",
                         header_ns=stamp)
            # REP-105: twist in the child frame (the root body); a free joint's linear velocity is in the world.
            recorder.odom(stamp, qpos[0:3], quat, _rotate_inverse(quat, qvel[0:3]), qvel[3:6], child_frame_id="base",
                          header_ns=stamp)
            lin_vel_w.append(qvel[0:3].copy())

        record_state()
        for step in range(round(DURATION_S / robot.control_dt)):
            obs = env.obs["policy"]
            raw = obs @ w + b
            env.action_manager.process(raw)  # the observation's last_action, as the robot side keeps it
            targets = np.concatenate([process(raw[0].numpy()), held])
            robot.set_targets(joints, targets)
            stamp = now_ns()
            recorder.task_command("base_velocity", stamp, robot.command("base_velocity"), header_ns=stamp)
            recorder.joint_command(stamp, targets)
            recorder.policy_step(stamp, step, obs[0].numpy(), raw[0].numpy(), targets, "run", "running",
                                 input_ns=stamp)
            for _ in range(robot.decimation):
                robot.step()
                record_state()
        status = recorder.close()
        assert status["recording_ok"] and status["recording_dropped"] == 0, status
    finally:
        robot.close()
    return Recording(out / "bag", export_dir, manifest, np.array(lin_vel_w))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield record_wl_bag(tmp_path_factory.mktemp("wl_bag"))
    finally:
        torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def logged_env(recorded):
    """The replay env with the bag's (the sim robot's) physics, shared by the replays on logged physics."""
    env = replay_env_for(open_bag(recorded.bag), physics="logged")
    yield env
    env.close()


def test_bag_holds_odometry_in_the_base_frame(recorded):
    log = open_bag(recorded.bag)
    samples = round(DURATION_S / log.metadata["control_dt"]) * 4 + 1
    assert log.topics["/odom"].msgtype == "nav_msgs/msg/Odometry" and log.topics["/odom"].count == samples
    assert log.metadata["topics"]["odom"] == "/odom" and log.metadata["source"] == "policy_node"
    odom = log.odom
    assert odom.position.shape == (samples, 3) and odom.orientation_wxyz.shape == (samples, 4)
    assert odom.linear.shape == odom.angular.shape == (samples, 3)
    assert (odom.frame_id, odom.child_frame_id) == ("odom", "base")
    np.testing.assert_allclose(odom.stamp, log.joint_states.stamp)
    # The twist is logged in the base frame (REP-105); the reader turns it back into the free joint's world velocity.
    linear_w, _ = odom.twist_world_body()
    np.testing.assert_allclose(linear_w, recorded.base_lin_vel_w, atol=1e-6)
    assert np.abs(odom.linear - linear_w).max() > 0.1  # the frames differ: the robot turns and pitches
    # The robot drove: the bag is a meaningful test of base drift.
    assert np.linalg.norm(odom.position[-1, :2] - odom.position[0, :2]) > 1.0
    assert np.all(odom.position[:, 2] > 0.3)  # and stayed up
    # The commands mix position targets (legs) and velocity targets (wheels, rad/s) in the policy's joint order.
    assert log.command_joint_names == [*wl.LEG_JOINTS, *wl.WHEEL_JOINTS, *wl.arm_joints()]
    assert log.velocity_command_joints == list(wl.WHEEL_JOINTS)
    wheels = log.joint_commands.values[:, 4:6]
    assert np.abs(wheels).max() > 5.0 and np.all(np.abs(wheels) <= 30.0)


def test_open_loop_replay_starts_from_odometry_and_tracks_the_base(recorded, logged_env):
    log = open_bag(recorded.bag)
    result = replay_open_loop(log, logged_env)
    assert result.initial_state == "joint_states+odom" and result.physics == "logged"
    assert result.segments == [(0, result.t.size)] and result.t.size == log.joint_states.t.size
    assert result.continuous_joints == list(wl.WHEEL_JOINTS) and result.velocity_joints == list(wl.WHEEL_JOINTS)
    # Same physics, same state, same targets: the base follows the odometry to the micrometre.
    assert result.has_base and result.base_t.shape == result.base_drift.shape == result.yaw_drift.shape == result.t.shape
    assert result.logged_base_pos.shape == result.sim_base_pos.shape == (result.t.size, 3)
    assert result.base_drift[0] == pytest.approx(0.0, abs=1e-6)
    assert result.base_distance > 1.0
    assert result.final_base_drift < 1e-3 and result.max_base_drift < 1e-3 and result.max_yaw_drift < 1e-3
    assert result.base_drift_per_metre < 1e-3
    # Joints: legs by position, wheels by velocity (their positions are unbounded, so they are left out of `error`).
    assert result.rmse < 1e-4 and np.isnan(result.rmse_per_joint[4:6]).all()
    assert np.isfinite(result.rmse_per_joint[6:]).all()  # the held arm joints: by position
    assert np.all(result.velocity_rmse_per_joint < 1e-2)
    assert np.ptp(result.logged_vel[:, 4:6], axis=0).min() > 5.0  # the wheels did spin up and down


def test_drift_shows_a_different_robot_or_a_broken_command(recorded, logged_env):
    log = open_bag(recorded.bag)
    exact = replay_open_loop(log, logged_env)
    randomized = replay_open_loop_for(log, physics="randomized", seed=3)
    assert randomized.physics == "randomized" and randomized.initial_state == "joint_states+odom"
    assert randomized.max_base_drift > 0.05 and randomized.max_base_drift > 1000 * exact.max_base_drift
    assert randomized.base_drift_per_metre > 0.02
    # Wheel targets 0.2 rad/s (2 cm/s) off: the open-loop base leaves the logged path.
    log.joint_commands.values[:, 4:6] += 0.2
    perturbed = replay_open_loop(log, logged_env)
    assert perturbed.max_base_drift > 0.01 and perturbed.max_base_drift > 100 * exact.max_base_drift
    assert np.nanmax(perturbed.velocity_rmse_per_joint[4:]) > 10 * np.nanmax(exact.velocity_rmse_per_joint[4:])


def test_without_odometry_the_base_starts_elsewhere(recorded, logged_env):
    log = open_bag(recorded.bag)
    exact = replay_open_loop(log, logged_env)
    log.odom = None
    blind = replay_open_loop(log, logged_env)
    assert blind.initial_state == "joint_states" and not blind.has_base and blind.base_drift is None
    # From the IMU's orientation at the model's default position, at rest: the joints go elsewhere.
    assert blind.rmse > 100 * exact.rmse


def test_command_order_and_wrapped_wheel_encoders(recorded, logged_env):
    """Commands in another joint order (wheels, held arm and legs mixed) and wheel positions that wrap at ±π
    (the encoder of a continuous joint) replay like the bag itself: no false resets, the same drift."""
    log = open_bag(recorded.bag)
    exact = replay_open_loop(log, logged_env)
    names = log.command_joint_names
    order = [*reversed(wl.WHEEL_JOINTS), *wl.arm_joints(), *wl.LEG_JOINTS]
    log.joint_commands.values = log.joint_commands.values[:, [names.index(j) for j in order]]
    log.metadata["command_joint_names"] = order
    wheels = log.joint_states.columns(wl.WHEEL_JOINTS)
    log.joint_states.position[:, wheels] = np.angle(np.exp(1j * log.joint_states.position[:, wheels]))
    assert np.abs(np.diff(log.joint_states.position[:, wheels], axis=0)).max() > 6.0  # it did wrap
    result = replay_open_loop(log, logged_env)
    assert result.joint_names == order and len(result.segments) == 1
    assert result.velocity_joints == list(reversed(wl.WHEEL_JOINTS))
    assert result.max_base_drift < 1e-3
    assert result.max_base_drift == pytest.approx(exact.max_base_drift, abs=1e-5)
    # Commands routed to the wrong actuators would not reproduce the log: swap legs and wheels.
    swapped = log.joint_commands.values.copy()
    swapped[:, :2], swapped[:, -2:] = log.joint_commands.values[:, -2:], log.joint_commands.values[:, :2]
    log.joint_commands.values = swapped
    assert replay_open_loop(log, logged_env).max_base_drift > 0.05


def test_a_reset_in_the_odometry_restarts_the_replay(recorded, logged_env):
    """A base that jumps (an episode reset of the sim robot, a relocalised odometry) starts a new segment there."""
    log = open_bag(recorded.bag)
    exact = replay_open_loop(log, logged_env)
    k = 200
    step_k = np.linalg.norm(log.odom.position[k, :2] - log.odom.position[k - 1, :2])
    log.odom.position[k:, 0] += 0.5
    result = replay_open_loop(log, logged_env)
    assert result.segments == [(0, k), (k, result.t.size)] and "1 jumps" in " ".join(result.notes)
    assert result.base_drift[k] == pytest.approx(0.0, abs=1e-6) and result.max_base_drift < 0.05
    assert result.base_distance == pytest.approx(exact.base_distance - step_k)  # the jump is not travel


def test_jump_check_takes_wheel_steps_modulo_a_turn():
    wrapped = (np.array([3.1, 0.5]), np.array([-3.1, 0.5]), np.zeros(2), np.zeros(2), 0.005)
    assert is_jump(*wrapped)  # a limited joint stepping 6.2 rad is a reset
    assert not is_jump(*wrapped, np.array([True, False]))  # a wheel encoder wrapping is not
    wheel_step = (np.array([0.0, 0.5]), np.array([1.0, 0.5]), np.zeros(2), np.zeros(2), 0.005)
    assert is_jump(*wheel_step, np.array([True, False]))  # a wheel turning 1 rad in 5 ms at rest still is


def test_policy_reevaluation_is_exact_on_the_wheel_legged_bag(recorded):
    result = reevaluate_policy(open_bag(recorded.bag))  # the bag's export_dir
    assert result.t.size == round(DURATION_S / recorded.manifest.control_dt)
    assert result.action_names == [*wl.LEG_JOINTS, *wl.WHEEL_JOINTS]
    assert result.max_abs_diff < 1e-5
    assert np.nanmax(np.abs(result.target_diff)) < 1e-5  # legs in rad, wheels in rad/s
    assert np.abs(result.logged[:, 4:]).max() > 0.5  # the wheel actions were not trivially zero


def test_cli_prints_the_drift_and_the_report_plots_it(recorded, tmp_path, capsys):
    bag = str(recorded.bag)
    assert main(["bag", "info", bag]) == 0
    info = capsys.readouterr().out
    assert "/odom" in info and "nav_msgs/msg/Odometry" in info and "odometry:  401 poses of 'base' in 'odom'" in info
    assert main(["bag", "export", bag, "--csv", str(tmp_path / "csv")]) == 0
    header = (tmp_path / "csv" / "odom.csv").read_text().splitlines()
    assert len(header) == 402 and "pose.pose.position.x" in header[0] and "twist.twist.linear.x" in header[0]

    report = tmp_path / "report"
    assert main(["replay", bag, "--mode", "open_loop", "--physics", "randomized", "--seed", "3",
                 "--report", str(report)]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "base drift vs odometry" in x)
    final = float(line.split("final ")[1].split(" m")[0])
    assert final > 0.05 and "m per metre over" in line and "max yaw drift" in line
    assert "left_wheel" in out and "rad/s (velocity)" in out
    summary = json.loads((report / "summary.json").read_text())
    base = summary["open_loop"]["base"]
    assert base["final_drift_m"] == pytest.approx(final, rel=1e-2) and base["distance_m"] > 1.0
    assert summary["open_loop"]["continuous_joints"] == sorted(wl.WHEEL_JOINTS)
    assert set(summary["open_loop"]["velocity_rmse_per_joint"]) == set(wl.WHEEL_JOINTS)
    assert "base_drift.png" in summary["plots"]
    png = report / "base_drift.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    page = (report / "index.html").read_text()
    assert "src='base_drift.png'" in page and "base drift vs odometry" in page

    assert main(["replay", bag, "--mode", "policy"]) == 0
    policy = capsys.readouterr().out
    assert float(policy.split("actions max |diff| ")[1].split(",")[0]) < 1e-5


def test_a_twist_logged_in_the_odom_frame_replays_the_same(recorded, logged_env):
    """`child_frame_id` empty: the twist is read in the odom frame (bag_format's convention)."""
    log = open_bag(recorded.bag)
    exact = replay_open_loop(log, logged_env)
    linear_w, angular_b = log.odom.twist_world_body()
    rot = np.zeros((len(angular_b), 9))
    for i, quat in enumerate(log.odom.orientation_wxyz):
        mujoco.mju_quat2Mat(rot[i], quat)
    log.odom.linear, log.odom.angular = linear_w, np.einsum("nij,nj->ni", rot.reshape(-1, 3, 3), angular_b)
    log.odom.child_frame_id = ""
    world = replay_open_loop(log, logged_env)
    assert world.max_base_drift == pytest.approx(exact.max_base_drift, abs=1e-6) and world.max_base_drift < 1e-3
    log.odom.child_frame_id = "base"  # the same numbers read in the wrong frame start the base moving wrongly
    wrong = replay_open_loop(log, logged_env)
    assert wrong.max_base_drift > 100 * exact.max_base_drift
