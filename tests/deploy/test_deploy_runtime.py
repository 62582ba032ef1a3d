# SPDX-License-Identifier: BSD-3-Clause
"""The deploy runtime against training: observation parity, joints by name, ONNX parity, a full step."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from batonlab.deploy import DeployRuntime, JointMismatchError, ObservationBuilder, RobotInputs, SafetyCfg, State
from batonlab.deploy import load_manifest, parse_manifest
from batonlab.env.env import BatonEnv
from batonlab.export.manifest import manifest_from_env
from batonlab.tasks import make_task_cfg
from ros.exports import arm_reach_manifest, make_export


def _inputs_from_env(env: BatonEnv, joints, i: int = 0) -> RobotInputs:
    """What a robot would report, read from world i of the training env."""
    qadr, dadr = env.scene.qpos_adr(joints), env.scene.dof_adr(joints)
    return RobotInputs(
        joint_pos=env.sim.qpos[i, qadr].double().numpy(),
        joint_vel=env.sim.qvel[i, dadr].double().numpy(),
        vectors={"ee_pos_b": env.sim.sensor("ee_pos_b")[i].numpy(), "ee_target": env.command_manager.command("ee_target")[i].numpy()},
        last_action=env.action_manager.action[i].numpy().copy(),
    )


@pytest.mark.parametrize("variant", ["arm_reach", "history_and_clip"])
def test_observation_matches_training_step_by_step(variant):
    cfg = make_task_cfg("arm_reach", play=True)
    cfg.num_envs = 2
    cfg.episode_length_s = 1.0  # a reset inside the rollout: history refills from the current frame
    if variant == "history_and_clip":
        cfg.observations["policy"].terms["joint_pos"].history_length = 3
        cfg.observations["policy"].terms["joint_vel"].clip = (-1.0, 1.0)
        cfg.observations["policy"].terms["last_action"].history_length = 2
    env = BatonEnv(cfg)
    builder = ObservationBuilder(manifest_from_env(env, "arm_reach"))
    obs, _ = env.reset()
    generator = torch.Generator().manual_seed(0)
    worst, resets = 0.0, 0
    for _ in range(120):
        deployed = builder.compute(_inputs_from_env(env, builder.ctx.joints))
        worst = max(worst, float(np.abs(deployed - obs["policy"][0].numpy()).max()))
        obs, _, terminated, truncated, _ = env.step(2.0 * torch.randn(2, 6, generator=generator))
        if terminated[0] or truncated[0]:
            builder.reset()
            resets += 1
    env.close()
    assert resets >= 2
    assert worst < 1e-5


def test_joints_are_matched_by_name_not_order():
    rt = DeployRuntime(parse_manifest(arm_reach_manifest()), ignored_joints=["finger_left", "finger_right"], policy=lambda o: o[:6])
    names = list(rt.joint_names)
    rt.set_joint_state(names, np.arange(6.0), np.arange(6.0) * 10, 0.0)
    in_order = rt.inputs.joint_pos.copy()
    shuffled = ["finger_right", *reversed(names), "finger_left"]
    rt.set_joint_state(shuffled, np.array([9.0, *np.arange(6.0)[::-1], 9.0]), np.zeros(8), 0.0)
    np.testing.assert_array_equal(rt.inputs.joint_pos, in_order)


def test_unknown_joints_refuse_with_their_names_and_missing_ones_are_waited_for():
    rt = DeployRuntime(parse_manifest(arm_reach_manifest()), policy=lambda o: o[:6])
    names = list(rt.joint_names)
    rt.set_joint_state(names[:-1], np.zeros(5), np.zeros(5), 0.0)  # a partial message is merged, not refused
    assert rt.never_received() == ["joint_states", "ee_pos_b", "ee_target"]
    assert rt.joint_states.never_received() == ["wrist_roll"]
    assert "never received joint_states for ['wrist_roll']" in rt.step(0.0).reason
    with pytest.raises(JointMismatchError, match=r"unexpected joints \['finger_left'\].*ignored_joints"):
        rt.set_joint_state(names + ["finger_left"], np.zeros(7), np.zeros(7), 0.0)
    fresh = DeployRuntime(parse_manifest(arm_reach_manifest()), policy=lambda o: o[:6])
    renamed = ["arm_" + n for n in names]
    with pytest.raises(JointMismatchError) as err:
        fresh.set_joint_state(renamed, np.zeros(6), np.zeros(6), 0.0)
    assert "missing joints ['shoulder_yaw'" in str(err.value) and "unexpected joints ['arm_shoulder_yaw'" in str(err.value)
    assert fresh.joint_states.never_received() == names, "nothing was accepted"


def test_a_full_step_turns_robot_inputs_into_clamped_targets(tmp_path):
    manifest = load_manifest(make_export(tmp_path, bias=np.full(6, 10.0)))  # a policy that asks far too much
    rt = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, max_joint_velocity=1e3, input_rate_samples=0),
                       ignored_joints=["finger_left", "finger_right"])
    names = [*manifest.joint_names, "finger_left", "finger_right"]
    q = np.array([*manifest.default_pos, 0.02, 0.02])
    rt.set_joint_state(names, q, np.zeros(8), 0.0)
    rt.set_vector("ee_pos_b", [0.3, 0.0, 0.3], 0.0)
    rt.set_vector("ee_target", [0.4, 0.0, 0.3], 0.0)
    result = rt.step(0.0)
    assert result.state is State.RUN
    np.testing.assert_allclose(result.raw_action, 10.0)
    expected_unclamped = manifest.default_pos + 0.5 * 10.0
    torque_room = manifest.torque_limits / manifest.kp
    np.testing.assert_allclose(result.command, np.minimum(np.minimum(expected_unclamped, manifest.default_pos + torque_room),
                                                          manifest.pos_limits[:, 1]))
    assert (result.command <= manifest.pos_limits[:, 1]).all()


def test_targets_are_clamped_to_the_actuators_control_range_as_in_training():
    from batonlab.deploy.actions import ActionProcessor

    manifest_json = arm_reach_manifest()
    manifest_json["joints"]["ctrl_range"][1] = [-1.0, 0.5]  # a shoulder actuator narrower than its joint
    processor = ActionProcessor(parse_manifest(manifest_json))
    targets = processor(np.full(6, 10.0, dtype=np.float32))
    assert targets[1] == 0.5, "the actuator's range, as training's action term clamps it"
    assert targets[0] == pytest.approx(2.97, abs=1e-5)


def test_a_new_episode_starts_as_after_a_reset_in_training(tmp_path):
    """`new_episode` (sim-to-sim's next episode: the world reset under a running policy): the next step sees no last
    action and its rate window starts from the joints it measures, not from the last episode's targets."""
    manifest = load_manifest(make_export(tmp_path, bias=np.full(6, 1.0)))
    rt = DeployRuntime(manifest, SafetyCfg(ramp_time_s=0.0, max_joint_velocity=1.0, input_rate_samples=0),
                       ignored_joints=["finger_left", "finger_right"])
    names = [*manifest.joint_names, "finger_left", "finger_right"]
    step = 1.0 * manifest.control_dt

    def run(q: np.ndarray, now: float):
        rt.set_joint_state(names, np.array([*q, 0.02, 0.02]), np.zeros(8), now)
        rt.set_vector("ee_pos_b", [0.3, 0.0, 0.3], now)
        rt.set_vector("ee_target", [0.4, 0.0, 0.3], now)
        return rt.step(now)

    q0 = np.asarray(manifest.default_pos, dtype=float)
    for k in range(20):  # targets walk up from q0 at the rate limit; the last action (1.0) is observed
        result = run(q0, k * manifest.control_dt)
    assert result.state is State.RUN and rt.episode == 0
    np.testing.assert_allclose(result.observation[-6:], 1.0)
    assert (result.command > q0 + 0.3).all()  # the last episode's targets, far above q1 below

    q1 = q0 - 0.3  # the reset moved every joint
    rt.new_episode()
    result = run(q1, 20 * manifest.control_dt)
    assert rt.episode == 1 and result.state is State.RUN
    np.testing.assert_allclose(result.observation[-6:], 0.0)  # as training's first step: no last action
    np.testing.assert_allclose(result.command, q1 + step, atol=1e-9)  # one step from the measured joints
