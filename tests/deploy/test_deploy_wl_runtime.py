# SPDX-License-Identifier: BSD-3-Clause
"""The robot-side runtime on the wheel-legged robot, without ROS: mixed position/velocity commands,
the held arm, the IMU inputs and their faults, the crouch stop; and the trained wl_balance policy
balancing through the runtime (safety filter included) in the training simulator as well as in `play`.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from batonlab.deploy import DeployRuntime, SafetyCfg, State, load_manifest, parse_manifest
from batonlab.env.env import BatonEnv
from batonlab.tasks import make_task_cfg
from ros.exports import make_export, wl_velocity_manifest

DT = 0.02
"""wl tasks' control period [s]."""


@pytest.fixture
def wl_export(tmp_path):
    """wl_velocity's manifest with a linear policy whose wheel actions are a constant 1.5 (12 rad/s)."""
    manifest = parse_manifest(wl_velocity_manifest())
    bias = np.zeros(manifest.action_dim)
    bias[[manifest.joint_names.index(w) for w in ("left_wheel", "right_wheel")]] = 1.5
    return load_manifest(make_export(tmp_path / "wl", manifest, bias=bias))


class RestingRobot:
    """The wheel-legged robot standing still at its default pose: joint states and IMU by name."""

    def __init__(self, runtime: DeployRuntime):
        self.runtime = runtime
        manifest = runtime.manifest
        self.joints = list(runtime.ctx.joints)
        self.position = np.array([manifest.default_joint_pos[j] for j in self.joints])
        self.imu = {name: spec.at_rest() for name, spec in manifest.sensors.items()}

    def follow(self, command: np.ndarray) -> None:
        """Ideal position servos: the position joints are where they were commanded."""
        for name, kind, value in zip(self.runtime.joint_names, self.runtime.command_kinds, command):
            if kind == "position":
                self.position[self.joints.index(name)] = value

    def publish(self, now: float, joints: bool = True, imu: bool = True) -> None:
        if joints:
            self.runtime.set_joint_state(self.joints, self.position, np.zeros(len(self.joints)), now)
        if imu:
            for name, value in self.imu.items():
                self.runtime.set_vector(name, value, now)


def running(manifest, **cfg) -> tuple[DeployRuntime, RestingRobot, float]:
    runtime = DeployRuntime(manifest, SafetyCfg(**{"ramp_time_s": 0.0, "input_rate_samples": 0, **cfg}))
    robot = RestingRobot(runtime)
    now = 0.0
    for _ in range(3):
        robot.publish(now)
        result = runtime.step(now)
        now += DT
    assert result.state is State.RUN, result.reason
    return runtime, robot, now


def test_commands_cover_legs_wheels_and_the_held_arm(wl_export):
    runtime, robot, now = running(wl_export)
    assert runtime.joint_names == (*wl_export.joint_names, *wl_export.held_joints.names)
    kinds = dict(zip(runtime.joint_names, runtime.command_kinds))
    assert kinds["left_wheel"] == "velocity" and kinds["left_hip_pitch"] == "position" and kinds["elbow_pitch"] == "position"
    robot.publish(now)
    command = dict(zip(runtime.joint_names, runtime.step(now).command))
    for name, target in zip(wl_export.held_joints.names, wl_export.held_joints.targets):
        assert command[name] == pytest.approx(target), f"the stowed arm is held at its target ({name})"
    # The wheels accelerate toward 12 rad/s within the acceleration limit (400 rad/s² = 8 rad/s per period).
    assert command["left_wheel"] == pytest.approx(12.0)
    # The command defaults to standing still at the nominal height: no operator needed.
    assert runtime.inputs.vectors["base_velocity"].tolist() == pytest.approx([0.0, 0.0, 0.463])


@pytest.mark.parametrize("fault", ["stale_imu", "stale_joints", "nan_orientation", "nan_gyro", "estop"])
def test_every_fault_crouches_with_braking_wheels_and_finite_commands(wl_export, fault):
    runtime, robot, now = running(wl_export, max_acceleration=1e4)
    robot.publish(now)
    before = dict(zip(runtime.joint_names, runtime.step(now).command))
    assert before["left_wheel"] == pytest.approx(12.0)
    if fault == "nan_orientation":
        robot.imu["imu_quat"] = np.array([np.nan, 0.0, 0.0, 1.0])
    elif fault == "nan_gyro":
        robot.imu["imu_gyro"] = np.array([0.0, np.inf, 0.0])
    elif fault == "estop":
        runtime.set_estop(True, now + 0.5 * DT)
    stopped_at, wheel, legs = None, [before["left_wheel"]], []
    for k in range(1, 120):
        t = now + k * DT
        robot.publish(t, joints=fault != "stale_joints", imu=fault != "stale_imu")
        result = runtime.step(t)
        assert result.command is not None and np.isfinite(result.command).all(), "a NaN never reaches a command"
        robot.follow(result.command)
        command = dict(zip(runtime.joint_names, result.command))
        if result.state is State.STOP and stopped_at is None:
            stopped_at = k
        if stopped_at is not None:
            wheel.append(command["left_wheel"])
            legs.append([command[j] for j in wl_export.stop.pose])
    timeout_periods = runtime.stale_timeout_s / DT
    assert stopped_at is not None and stopped_at <= (timeout_periods + 3 if fault.startswith("stale") else 1), \
        f"{fault}: stop after {stopped_at} periods"
    steps = -np.diff(wheel)
    assert (steps >= 0).all() and steps.max() <= runtime.safety_cfg.stop_deceleration * DT + 1e-9, \
        "wheel speed falls within the deceleration limit, never jumps to zero"
    assert wheel[-1] == 0.0
    assert runtime.safety.stop_phase(now + 120 * DT) == "damp" or fault == "stale_joints"
    pose = np.array(list(wl_export.stop.pose.values()))
    # Legs reached the crouch (then, with measurements, the damped legs follow the measured pose).
    reached = min(np.abs(np.array(legs) - pose).max(axis=1))
    assert reached < 1e-9, f"{fault}: the legs never reached the crouch pose (closest {reached:.3f} rad)"


@pytest.mark.slow
def test_trained_wl_balance_balances_through_the_runtime_as_in_play(wl_balance_policy):
    """The exported wl_balance policy runs in the training simulator through the whole robot-side pipeline:
    IMU and joint states in, the safety filter's limits (acceleration included) on what goes out, and the
    filtered targets applied through the training action terms. Survival must match `play`."""
    from ros.training import play_on_seeds, seed_episode

    seeds = range(1000, 1016)
    manifest = load_manifest(wl_balance_policy.export_dir)
    cfg = make_task_cfg("wl_balance", play=True)
    cfg.num_envs = 1
    env = BatonEnv(cfg)
    joints = [*manifest.joint_names, *manifest.held_joints.names]
    qadr, dadr = env.scene.qpos_adr(joints), env.scene.dof_adr(joints)
    scale, offset = manifest.action_scale, manifest.action_offset
    survived, limited_steps, steps = [], 0, 0
    for seed in seeds:
        runtime = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, input_rate_samples=0, max_joint_velocity=6.0))
        seed_episode(env, seed)
        env.reset()
        for k in range(env.max_episode_length):
            now = k * manifest.control_dt
            runtime.set_joint_state(joints, env.sim.qpos[0, qadr].numpy(), env.sim.qvel[0, dadr].numpy(), now)
            for name in manifest.sensors:
                runtime.set_vector(name, env.sim.sensor(name)[0].numpy(), now)
            result = runtime.step(now)
            assert result.state is State.RUN, result.reason
            policy_targets = result.command[: manifest.action_dim]
            unfiltered = np.clip(offset + scale * result.raw_action, manifest.ctrl_range[:, 0], manifest.ctrl_range[:, 1])
            limited_steps += int(np.abs(policy_targets - unfiltered).max() > 1e-6)
            steps += 1
            # The filtered targets, through the training action terms (their delay included), as raw actions.
            action = torch.as_tensor((policy_targets - offset) / scale, dtype=torch.float32)[None]
            _, _, terminated, truncated, _ = env.step(action)
            if bool(terminated[0] | truncated[0]):
                break
        survived.append(not bool(terminated[0]))
    env.close()
    deployed = np.mean(survived)
    play = 1.0 - play_on_seeds("wl_balance", wl_balance_policy.policy, seeds).terminated.mean()
    print(f"\n[wl runtime] survival through the runtime {deployed:.3f}, play {play:.3f} over {len(seeds)} seeds; the safety "
          f"filter changed the policy's targets in {limited_steps} of {steps} steps")
    assert play >= 0.8, f"the briefly trained policy is too weak for the comparison (play {play:.2f})"
    assert abs(deployed - play) <= 0.10
