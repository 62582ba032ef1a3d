# SPDX-License-Identifier: BSD-3-Clause
"""Training under the robot's command filter (`ActionTermCfg.max_target_rate`): the position targets a grasping
policy trains with are those the robot's safety filter lets through (torque window, then the rate limit), so a
policy that jumps its targets is throttled in training as on the robot, not only there.

- the torch twin in `batonlab.actions.joint` equals `SafetyFilter`'s run-state rule, step for step;
- arm_lift's arm targets start at the reset pose and move at most 3 rad/s;
- the export writes the rate, the runtime's filter applies the lower of it and its own limit, and names the
  joints it would throttle beyond training.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from batonlab.actions.joint import command_filter_targets
from batonlab.deploy import DeployRuntime, SafetyCfg, SafetyFilter, State, parse_manifest
from batonlab.deploy.actions import POSITION
from batonlab.deploy.manifest_json import ManifestError
from batonlab.deploy.safety import JointLimits
from batonlab.tasks.grasping import ARM_TARGET_RATE
from conftest import make_env
from ros.exports import arm_lift_manifest

DT = 0.02


def test_the_training_twin_is_the_safety_filters_run_state_rule():
    rng = np.random.default_rng(0)
    n = 4
    low, high = np.array([-1.0, -2.0, -0.5, 0.0]), np.array([1.0, 2.0, 0.5, 0.04])
    torque, kp, kd = np.array([10.0, 30.0, 5.0, np.inf]), np.array([100.0, 160.0, 20.0, 300.0]), np.array([5.0, 8.0, 1.0, 10.0])
    rate = np.array([3.0, 3.0, 1.0, np.inf])
    limits = JointLimits((POSITION,) * n, low, high, torque, kp, kd, names=("a", "b", "c", "d"), max_rate=rate)
    robot = SafetyFilter(SafetyCfg(ramp_time_s=0.0, max_joint_velocity=6.0), limits, DT)
    q0 = rng.uniform(low, high)
    robot.update(0.0, True, None, q0)
    robot.update(0.0, True, None, q0)
    assert robot.state is State.RUN
    robot.command(0.0, q0.copy(), q0, np.zeros(n), True)  # training's reset: the previous targets are the pose
    previous = torch.as_tensor(q0)
    step = np.minimum(6.0, rate) * DT
    t = lambda a: torch.as_tensor(a, dtype=torch.float64)  # noqa: E731
    bound_by = {"torque": 0, "rate": 0}
    for k in range(200):
        q, qd = rng.uniform(low, high), rng.normal(0.0, 2.0, n)
        target = rng.uniform(low - 1.0, high + 1.0)  # the robot's post-processing clamps to the control range first
        target = np.clip(target, low, high)
        expected = robot.command(k * DT, target.copy(), q, qd, True)
        got = command_filter_targets(t(target), previous, t(q), t(qd), t(kp), t(kd), t(torque), t(low), t(high),
                                     t(step))
        np.testing.assert_allclose(got.numpy(), expected, atol=1e-12, err_msg=f"step {k}")
        previous = got
        window = np.clip(target, q + (-torque + kd * qd) / kp, q + (torque + kd * qd) / kp)
        bound_by["torque"] += int(np.any(window != target))
        bound_by["rate"] += int(np.any(np.abs(expected - window) > 1e-12))
    assert bound_by["torque"] > 50 and bound_by["rate"] > 50, bound_by  # both stages are exercised


def test_arm_targets_start_at_the_reset_pose_and_move_at_most_the_trained_rate():
    env = make_env("arm_lift", 8, seed=0, edit=lambda cfg: setattr(cfg, "privilege_level", 0.0))
    term = env.action_manager.terms["arm"]
    assert term.limited and term.max_step == pytest.approx(ARM_TARGET_RATE * env.step_dt)
    q0 = env.sim.qpos.index_select(1, term.qpos_adr).clone()
    torch.testing.assert_close(term.previous_targets, q0)
    generator = torch.Generator().manual_seed(0)
    previous = q0
    for _ in range(30):
        actions = 4.0 * torch.randn(env.num_envs, env.num_actions, generator=generator)  # far and jumpy targets
        q = env.sim.qpos.index_select(1, term.qpos_adr).clone()
        qd = env.sim.qvel.index_select(1, term.dof_adr).clone()
        env.step(actions)
        targets = env.sim.ctrl.index_select(1, term.actuator_ids)
        assert ((targets - previous).abs() <= term.max_step + 1e-6).all()
        pd = term.kp * (targets - q) - term.kd * qd
        assert (pd.abs() <= term.torque + 1e-3).all(), "every target inside the torque window (it is never empty here)"
        previous = targets.clone()
        reset = env.episode_length_buf == 0
        previous[reset] = env.sim.qpos.index_select(1, term.qpos_adr)[reset]
    gripper = env.action_manager.terms["gripper"]
    assert not gripper.limited
    env.close()


def test_the_manifest_carries_the_rate_and_the_runtime_applies_the_lower_limit(tmp_path):
    data = arm_lift_manifest()
    rates = {a["name"]: a["max_target_rate"] for a in data["actions"]}
    assert rates == {"arm": ARM_TARGET_RATE, "gripper": None}
    manifest = parse_manifest(data)
    np.testing.assert_array_equal(manifest.max_target_rate, [ARM_TARGET_RATE] * 6 + [np.inf])
    from batonlab.deploy.manifest_sections import ActionTerm

    with pytest.raises(ManifestError, match="max_target_rate"):
        ActionTerm.from_json({**data["actions"][0], "max_target_rate": -1.0}, "actions[0]")
    with pytest.raises(ManifestError, match="max_target_rate"):
        ActionTerm.from_json({**data["actions"][0], "max_target_rate": "fast"}, "actions[0]")
    legacy = {k: v for k, v in data["actions"][0].items() if k != "max_target_rate"}
    assert ActionTerm.from_json(legacy, "actions[0]").max_target_rate is None  # exports before the field

    class ZeroPolicy:
        def __call__(self, obs):
            return np.zeros(manifest.action_dim, dtype=np.float32)

    loose = DeployRuntime(manifest, SafetyCfg(max_joint_velocity=6.0), policy=ZeroPolicy(), ignored_joints=["finger_right"])
    dt = loose.dt
    np.testing.assert_allclose(loose.safety.max_step[:7], [ARM_TARGET_RATE * dt] * 6 + [6.0 * dt])
    assert loose.throttled_joints() == {}
    tight = DeployRuntime(manifest, SafetyCfg(max_joint_velocity=2.0), policy=ZeroPolicy(), ignored_joints=["finger_right"])
    np.testing.assert_allclose(tight.safety.max_step[:7], [2.0 * dt] * 7)
    assert tight.throttled_joints() == {j: ARM_TARGET_RATE for j in manifest.joint_names[:6]}
