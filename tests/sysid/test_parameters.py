# SPDX-License-Identifier: BSD-3-Clause
"""Parameter groups over `mujoco.sysid`: their modifiers write what they say however often the spec is rebuilt, bad
names are refused, and a fit recovers the arm's changed armature, damping, friction loss and gains from its motion."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
from mujoco import rollout, sysid

from batonlab.robots.arm6 import ARM_JOINTS, home_pose, make_arm6_spec
from batonlab.sysid.parameters import SysidParameterError, coarse_parameters, joint_parameters, start_from_shared

CONTROL_DT = 0.02
"""The policy's control period [s] (50 Hz); the targets are held over the physics steps in between."""


def _arm_motion(truth: mujoco.MjSpec, seconds: float = 3.0, seed: int = 0):
    """(initial state, control at the physics rate, measured joint positions and velocities at 50 Hz) of the arm
    `truth` driven by sums of sines around its home pose."""
    model = truth.compile()
    substeps = round(CONTROL_DT / model.opt.timestep)
    rng = np.random.default_rng(seed)
    home = home_pose()
    q0 = np.array([home[j] for j in ARM_JOINTS])
    t = np.arange(round(seconds / CONTROL_DT) + 1) * CONTROL_DT
    freq, amp, phase = rng.uniform(0.3, 1.5, (3, 6)), rng.uniform(0.1, 0.3, (3, 6)), rng.uniform(0, 2 * np.pi, (3, 6))
    targets = q0 + (amp * np.sin(2 * np.pi * freq * t[:, None, None] + phase)).sum(axis=1)
    ctrl = np.zeros((len(t) - 1, model.nu))
    ctrl[:, :6] = targets[:-1]
    ctrl = np.repeat(ctrl, substeps, axis=0)
    qpos = model.qpos0.copy()
    qpos[:6] = q0
    initial = sysid.create_initial_state(model, qpos, np.zeros(model.nv))
    state, _ = rollout.rollout(model, mujoco.MjData(model), initial, ctrl)
    sampled = state[0, substeps - 1::substeps]  # the state at the end of each control period
    qadr = np.array([model.jnt_qposadr[model.joint(j).id] for j in ARM_JOINTS])
    dadr = np.array([model.jnt_dofadr[model.joint(j).id] for j in ARM_JOINTS])
    measured = np.concatenate([sampled[:, 1 + qadr], sampled[:, 1 + model.nq + dadr]], axis=1)
    signals = [(j, sysid.SignalType.MjStateQPos) for j in ARM_JOINTS] + [(j, sysid.SignalType.MjStateQVel)
                                                                          for j in ARM_JOINTS]
    times = np.arange(len(ctrl) + 1) * model.opt.timestep
    return (initial, sysid.TimeSeries(times, np.vstack([ctrl, ctrl[-1:]])),
            sysid.TimeSeries.from_names(sampled[:, 0], measured, model, signals))


def test_modifiers_write_absolute_values_however_often_the_spec_is_rebuilt():
    spec = make_arm6_spec()
    params = joint_parameters(spec, ["elbow_pitch"], ["armature", "damping", "frictionloss", "kp", "kd",
                                                      "torque_limit"])
    assert [p.nominal[0] for p in params.values()] == [0.02, 0.5, 0.05, 1.0, 1.0, 40.0]
    for name, value in [("armature", 0.05), ("damping", 0.2), ("frictionloss", 0.4), ("kp", 1.5), ("kd", 0.5),
                        ("torque_limit", 30.0)]:
        params[f"elbow_pitch/{name}"].value[:] = value
    for _ in range(3):  # mujoco.sysid rebuilds the same spec at every evaluation
        model = sysid.apply_param_modifiers(params, spec)
    joint, actuator = model.joint("elbow_pitch"), model.actuator("elbow_pitch")
    damping = model.dof_damping[joint.dofadr[0]]
    assert (joint.armature[0], damping, joint.frictionloss[0]) == pytest.approx((0.05, 0.2, 0.4))
    assert (actuator.gainprm[0], -actuator.biasprm[1], -actuator.biasprm[2]) == pytest.approx((150.0, 150.0, 2.5))
    assert actuator.forcerange.tolist() == [-30.0, 30.0] and model.actuator_forcelimited[actuator.id]
    assert model.joint("shoulder_pitch").armature[0] == 0.02  # the other joints keep theirs


def test_unknown_groups_and_joints_are_refused_by_name():
    with pytest.raises(SysidParameterError, match=r"unknown parameter groups \['inertia'\]; valid: \['armature'"):
        joint_parameters(make_arm6_spec(), ["elbow_pitch"], ["inertia"])
    with pytest.raises(SysidParameterError, match=r"joints \['elbow'\] are not in the model"):
        joint_parameters(make_arm6_spec(), ["elbow"], ["damping"])
    spec = make_arm6_spec()
    spec.delete(spec.actuator("elbow_pitch"))
    with pytest.raises(SysidParameterError, match="elbow_pitch: no position actuator drives it"):
        joint_parameters(spec, ["elbow_pitch"], ["kp"])


def test_a_per_joint_fit_starts_from_the_shared_groups_of_its_joints():
    """`coarse_parameters` shares what a per-joint fit goes coarse to fine from (never a torque limit, whose one
    absolute value means little across joints); `start_from_shared` puts each joint there, within its bounds."""
    spec = make_arm6_spec()
    joints = ["shoulder_pitch", "elbow_pitch"]
    params = joint_parameters(spec, joints, ["damping", "kp", "torque_limit"])
    coarse = coarse_parameters(spec, joints, ["damping", "kp", "torque_limit"])
    assert list(coarse.keys()) == ["*/damping", "*/kp"]
    assert coarse_parameters(spec, ["elbow_pitch"], ["damping"]) is None  # one joint: nothing to share
    assert coarse_parameters(spec, joints, ["torque_limit"]) is None
    coarse["*/damping"].value[:], coarse["*/kp"].value[:] = 0.3, 9.0
    start = start_from_shared(params, coarse)
    assert [start[f"{j}/damping"].value[0] for j in joints] == [0.3, 0.3]
    assert start["elbow_pitch/kp"].value[0] == 4.0  # clipped to the per-joint bound
    assert start["elbow_pitch/torque_limit"].value[0] == params["elbow_pitch/torque_limit"].value[0]
    assert params["elbow_pitch/damping"].value[0] == 0.5  # the given start is left as it was


def test_a_fit_recovers_the_arms_changed_joint_and_actuator_parameters():
    """Armature ×3, damping ×0.5, friction loss 0.3 N·m added, kp ×0.8 on every arm joint: each fitted to 1 % from
    3 s of motion sampled at 50 Hz (no noise), starting at the nominal model."""
    truth = make_arm6_spec()
    for j in ARM_JOINTS:
        truth.joint(j).armature *= 3.0
        truth.joint(j).damping[0] *= 0.5
        truth.joint(j).frictionloss = 0.3
        sysid.apply_pgain(truth, j, 0.8 * truth.actuator(j).gainprm[0])
    initial, control, measured = _arm_motion(truth)
    spec = make_arm6_spec()
    params = joint_parameters(spec, list(ARM_JOINTS), ["armature", "damping", "frictionloss", "kp"])
    sequence = sysid.ModelSequences("arm6", spec, "sines", initial, control, measured, allow_missing_sensors=True)
    fitted, _ = sysid.optimize(params, sysid.build_residual_fn(models_sequences=[sequence], n_threads=1),
                               optimizer="mujoco", max_iters=30)
    nominal = make_arm6_spec()
    for j in ARM_JOINTS:
        expected = {"armature": 3.0 * nominal.joint(j).armature, "damping": 0.5 * nominal.joint(j).damping[0],
                    "frictionloss": 0.3, "kp": 0.8}
        for group, value in expected.items():
            assert fitted[f"{j}/{group}"].value[0] == pytest.approx(value, rel=0.01), (j, group)
