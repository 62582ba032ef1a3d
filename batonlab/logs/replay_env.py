# SPDX-License-Identifier: BSD-3-Clause
"""The replay simulator: one world of a bag's task, set to what the bag logged.

Open-loop replay and state playback start from the same world (the task's play configuration with
the requested physics parameters) and write the same logged quantities into it (joint states, base
orientation, command markers); this module holds that shared part so each mode only says how it
drives the world.
"""

from __future__ import annotations

import copy

import mujoco
import numpy as np
import torch

from batonlab.env.cfg import TaskCfg
from batonlab.env.env import BatonEnv
from batonlab.logs.bag_reader import BagError, BagLog
from batonlab.logs.sim_recorder import PARAM_FIELDS
from batonlab.sim.joints import is_one_dof

PHYSICS_MODES = ("logged", "nominal", "randomized")
"""Model parameters of the replay: those stored in the bag, the task's nominal model, or a fresh
draw of the task's startup randomisation (a different robot; shows the sim-vs-log gap)."""


def task_of(log: BagLog, task: str | None = None) -> str:
    """The bag's task: `task` when given, else the one the bag's metadata names."""
    task = task or log.metadata.get("task")
    if not task:
        raise BagError(f"{log.path}: the bag does not say which task it comes from; pass --task NAME")
    return task


def make_replay_env(log: BagLog, cfg: TaskCfg, physics: str = "logged", seed: int = 0, task_name: str | None = None,
                    robot: str | None = None) -> BatonEnv:
    """One world of `cfg` (the bag's task, play configuration) with the requested physics parameters.

    Startup randomisation runs only for `physics="randomized"`; otherwise every randomisable model
    parameter (`sim_recorder.PARAM_FIELDS`, also those a reset event drew) is the nominal model's,
    and with "logged" the parameters stored in the bag are written over them. The bag must log every
    joint the task acts on: a bag of another robot is refused rather than replayed into this one with
    its joints left at rest. `task_name` and `robot` (its description file) only name them in errors;
    `batonlab.tasks.replay.replay_env_for` builds `cfg` from the bag's task name.
    """
    if physics not in PHYSICS_MODES:
        raise ValueError(f"physics must be one of {PHYSICS_MODES}, got {physics!r}")
    name = task_name or log.metadata.get("task") or "?"
    cfg = copy.deepcopy(cfg)
    cfg.num_envs = 1
    cfg.seed = int(seed)
    cfg.sim.num_threads = 1
    if physics != "randomized":
        cfg.events = {k: v for k, v in cfg.events.items() if v.mode != "startup"}
    env = BatonEnv(cfg)
    acted = [j for term in env.action_manager.terms.values() for j in term.joint_names]
    logged = set(log.joint_states.names if log.joint_states is not None else log.metadata.get("joint_names") or [])
    missing = [j for j in acted if j not in logged]
    if logged and missing:
        env.close()
        where = f"robot {robot}" if robot else "its default robot"
        raise BagError(f"{log.path}: task '{name}' over {where} acts on joints the bag does not log: {missing} "
                       f"(the bag logs {sorted(logged)}); was it recorded on another robot?")
    model_meta = log.metadata.get("model")
    if model_meta and (model_meta.get("nq"), model_meta.get("nv")) != (env.scene.model.nq, env.scene.model.nv):
        env.close()
        raise BagError(f"{log.path}: recorded with a model of nq={model_meta.get('nq')}, nv={model_meta.get('nv')}; "
                       f"task '{name}' now has nq={env.scene.model.nq}, nv={env.scene.model.nv}")
    ids = torch.zeros(1, dtype=torch.long)
    if physics != "randomized":
        # Reset events may randomise parameters too (actuator gains): back to the nominal model first.
        nominal = {}
        for name in PARAM_FIELDS:
            value = np.asarray(getattr(env.scene.model, name))
            if not np.array_equal(env.sim.get_params(name)[0].cpu().numpy(), value):
                nominal[name] = torch.as_tensor(value)[None]
        if nominal:
            env.sim.set_params(ids, **nominal)
    if physics == "logged" and log.metadata.get("physics"):
        env.sim.set_params(ids, **{k: torch.as_tensor(np.asarray(v))[None] for k, v in log.metadata["physics"].items()})
    return env


def logged_qpos(env: BatonEnv, names, positions: np.ndarray, base_quat: np.ndarray | None = None) -> torch.Tensor:
    """A full qpos: the default pose with the named 1-DoF joints (and a free base's orientation) set."""
    model = env.scene.model
    qpos = env.default_qpos.clone().double()
    for name, value in zip(names, positions):
        if name in env.scene.joint_names and np.isfinite(value):
            j = env.scene.joint_ids([name])[0]
            if is_one_dof(model, j):
                qpos[int(model.jnt_qposadr[j])] = float(value)
    if base_quat is not None and model.njnt and int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE):
        adr = int(model.jnt_qposadr[0])
        qpos[adr + 3 : adr + 7] = torch.as_tensor(base_quat, dtype=torch.float64)
    return qpos


def logged_qvel(env: BatonEnv, names, velocities: np.ndarray) -> torch.Tensor:
    """A full qvel: zero but for the named 1-DoF joints' logged velocities."""
    model = env.scene.model
    qvel = torch.zeros(model.nv, dtype=torch.float64)
    for name, value in zip(names, velocities):
        if name in env.scene.joint_names and np.isfinite(value):
            j = env.scene.joint_ids([name])[0]
            if is_one_dof(model, j):
                qvel[int(model.jnt_dofadr[j])] = float(value)
    return qvel


def set_markers(env: BatonEnv, log: BagLog, t: float) -> None:
    """Move command markers (mocap bodies of command terms) to the logged task commands at time `t`."""
    for name, series in log.task_commands.items():
        term = env.command_manager.terms.get(name)
        if term is None or getattr(term, "mocap_id", None) is None or series.values.shape[1] != 3:
            continue
        k = max(0, int(np.searchsorted(series.t, t + 1e-9, side="right")) - 1)
        value = torch.as_tensor(series.values[k], dtype=torch.float32) + term.base_offset_w.cpu()
        env.sim.mocap_pos[0, term.mocap_id] = value


def imu_orientation_at(log: BagLog, t: float) -> np.ndarray | None:
    """The IMU orientation (wxyz) last logged at or before `t` (the first one for an earlier `t`); None without IMU."""
    if log.imu is None or log.imu.t.size == 0:
        return None
    k = max(0, int(np.searchsorted(log.imu.t, t, side="right")) - 1)
    return log.imu.orientation_wxyz[k]
