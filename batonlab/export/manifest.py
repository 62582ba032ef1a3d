# SPDX-License-Identifier: BSD-3-Clause
"""The deployment manifest, filled from the objects that drive the simulator.

The manifest's definition lives on the robot side (`batonlab.deploy.manifest.Manifest`, numpy only);
this module fills it. Every number is read from the env that trained the policy (its action terms,
its compiled MuJoCo model, its observation manager), never retyped, so the robot side cannot drift
from sim.
"""

from __future__ import annotations

import mujoco
import numpy as np

import batonlab
from batonlab.deploy.manifest import (  # noqa: F401  (sha256_file: the robot side checks the same hash)
    ActionTerm,
    ActuatedJoints,
    CommandSpec,
    ControlTiming,
    Manifest,
    PolicyFile,
    sha256_file,
)
from batonlab.env.env import BatonEnv

_SCALAR_JOINTS = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


def manifest_from_env(env: BatonEnv, task: str, obs_group: str = "policy", training_config: dict | None = None) -> Manifest:
    """Everything the robot needs to rebuild the policy input and interpret its output (ONNX hash not filled in).

    Args:
        env: The env the policy was trained in (its play configuration is fine: the contract is the same).
        task: Registered task name.
        obs_group: Observation group the policy reads.
        training_config: How the policy was trained (checkpoint, configs), stored for reference.

    Raises:
        ValueError: an action term whose target offset is neither its joints' default position nor zero
            (the manifest cannot express it).
    """
    model = env.scene.model
    terms = list(env.action_manager.terms.items())
    joint_names = [j for _, term in terms for j in term.joint_names]
    joint_ids = env.scene.joint_ids(joint_names)
    actuator_ids = env.scene.actuator_for_joints(joint_names)
    kp, kd = env.scene.actuator_gains(actuator_ids)
    act = actuator_ids.numpy()
    forcerange = np.where(model.actuator_forcelimited[act, None].astype(bool), model.actuator_forcerange[act], [-np.inf, np.inf])
    joint_range = np.where(model.jnt_limited[joint_ids, None].astype(bool), model.jnt_range[joint_ids], [-np.inf, np.inf])
    # The range the action terms clamp their targets into before writing them to MuJoCo's ctrl.
    ctrl_range = np.stack([np.concatenate([t.ctrl_low.cpu().numpy() for _, t in terms]),
                           np.concatenate([t.ctrl_high.cpu().numpy() for _, t in terms])], axis=1)
    # Default pose of every 1-DoF joint, for observation terms that read joints the policy does not command.
    scalar = [j for j in range(model.njnt) if int(model.jnt_type[j]) in _SCALAR_JOINTS]
    default_qpos = env.default_qpos.cpu().double().numpy()
    default_joint_pos = {model.joint(j).name: float(default_qpos[int(model.jnt_qposadr[j])]) for j in scalar}
    return Manifest(
        task=task,
        policy=PolicyFile(),
        control=ControlTiming(physics_dt=float(env.cfg.sim.physics_dt), decimation=int(env.cfg.sim.decimation)),
        joints=ActuatedJoints(
            names=tuple(joint_names),
            pos_limits=_pairs(joint_range),
            ctrl_range=_pairs(ctrl_range),
            torque_limits=tuple(float(v) for v in np.abs(forcerange).max(axis=1)),
            kp=tuple(float(v) for v in kp),
            kd=tuple(float(v) for v in kd),
        ),
        default_joint_pos=default_joint_pos,
        actions=tuple(_action_term(name, term, default_qpos) for name, term in terms),
        obs_terms=tuple(env.observation_manager.layout[obs_group]),
        obs_group=obs_group,
        commands={name: CommandSpec(type(c).__name__, int(c.dim)) for name, c in env.command_manager.terms.items()},
        batonlab_version=batonlab.__version__,
        training_config=training_config or {},
    )


def _action_term(name: str, term, default_qpos: np.ndarray) -> ActionTerm:
    offset = term.offset.cpu().double().numpy()
    if not offset.any():
        use_default_offset = False
    elif np.array_equal(offset, default_qpos[term.qpos_adr.cpu().numpy()]):
        use_default_offset = True
    else:
        raise ValueError(f"action term '{name}' adds the offset {offset.tolist()}, which is neither its joints' default "
                         "position nor zero; the manifest cannot express it")
    return ActionTerm(
        name=name,
        type=term.action_type,
        joints=tuple(term.joint_names),
        scale=tuple(float(s) for s in term.scale.cpu().tolist()),
        clip=tuple(map(float, term.cfg.clip)) if term.cfg.clip is not None else None,
        use_default_offset=use_default_offset,
    )


def _pairs(values: np.ndarray) -> tuple[tuple[float, float], ...]:
    return tuple((float(lo), float(hi)) for lo, hi in values)
