# SPDX-License-Identifier: BSD-3-Clause
"""The deployment manifest, built from the objects that drive the simulator.

Every number here is read from the env that trained the policy (its action terms, its compiled
MuJoCo model, its observation manager), never retyped, so the robot side cannot drift from sim.
"""

from __future__ import annotations

import json
from pathlib import Path

import mujoco
import numpy as np

import batonlab
from batonlab.deploy.manifest import sha256_file  # noqa: F401  (the robot side checks the same hash)
from batonlab.env.env import BatonEnv
from batonlab.utils.serialize import to_plain

SCHEMA_VERSION = 1


def build_manifest(env: BatonEnv, task: str, obs_group: str = "policy", training_config: dict | None = None) -> dict:
    """Everything the robot needs to rebuild the policy input and interpret its output."""
    model = env.scene.model
    actions, joint_names = [], []
    for name, term in env.action_manager.terms.items():
        actions.append(
            {
                "name": name,
                "type": term.action_type,
                "joints": term.joint_names,
                "scale": term.scale.cpu().tolist(),
                "offset": term.offset.cpu().tolist(),
                "clip": list(term.cfg.clip) if term.cfg.clip is not None else None,
            }
        )
        joint_names += term.joint_names
    joint_ids = env.scene.joint_ids(joint_names)
    actuator_ids = env.scene.actuator_for_joints(joint_names)
    kp, kd = env.scene.actuator_gains(actuator_ids)
    act = actuator_ids.numpy()
    forcerange = np.where(model.actuator_forcelimited[act, None].astype(bool), model.actuator_forcerange[act], [-np.inf, np.inf])
    joint_range = np.where(model.jnt_limited[joint_ids, None].astype(bool), model.jnt_range[joint_ids], [-np.inf, np.inf])
    default_pos = env.default_qpos[env.scene.qpos_adr(joint_names)].cpu().numpy()

    layout = env.observation_manager.layout[obs_group]
    obs_cfg = env.cfg.observations[obs_group]
    terms = [
        {
            "name": t.name,
            "func": t.func,
            "params": to_plain(obs_cfg.terms[t.name].params),
            "size": t.size,
            "scale": t.scale,
            "clip": list(t.clip) if t.clip is not None else None,
            "history_length": t.history_length,
        }
        for t in layout
    ]
    commands = {name: {"type": type(c).__name__, "dim": c.dim} for name, c in env.command_manager.terms.items()}
    # Default pose of every 1-DoF joint, for observation terms that read joints the policy does not command.
    scalar = [j for j in range(model.njnt) if int(model.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))]
    default_joint_pos = {model.joint(j).name: float(env.default_qpos[int(model.jnt_qposadr[j])]) for j in scalar}
    return {
        "schema_version": SCHEMA_VERSION,
        "batonlab_version": batonlab.__version__,
        "task": task,
        "policy": {
            "file": "policy.onnx",
            "sha256": None,
            "input_name": "obs",
            "output_name": "actions",
            "obs_dim": env.observation_manager.group_dim(obs_group),
            "action_dim": env.num_actions,
        },
        "control": {
            "dt": env.step_dt,
            "rate_hz": 1.0 / env.step_dt,
            "physics_dt": env.cfg.sim.physics_dt,
            "decimation": env.cfg.sim.decimation,
        },
        "joints": {
            "names": joint_names,
            "default_pos": default_pos.tolist(),
            "pos_limits": _finite(joint_range),
            "torque_limits": _finite(np.abs(forcerange).max(axis=1)),
            "kp": kp.tolist(),
            "kd": kd.tolist(),
        },
        "actions": actions,
        "observations": {"group": obs_group, "terms": terms},
        "commands": commands,
        "default_joint_pos": default_joint_pos,
        "training_config": training_config or {},
    }


def _finite(values: np.ndarray):
    """JSON has no infinity: unlimited bounds are written as null."""
    return [(_finite(v) if isinstance(v, np.ndarray) else (float(v) if np.isfinite(v) else None)) for v in values]


def write_manifest(manifest: dict, path: str | Path) -> None:
    Path(path).write_text(json.dumps(manifest, indent=2))
