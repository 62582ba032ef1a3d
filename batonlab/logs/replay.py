# SPDX-License-Identifier: BSD-3-Clause
"""Replaying a bag in simulation: open-loop, state playback, policy re-evaluation.

- `replay_open_loop`: start the task's simulator from the logged initial state and drive it with
  the logged joint commands (zero-order hold at their log times, at the physics rate); compare the
  simulated joint trajectory with the logged one. A bag written by `batonlab play record=DIR`
  carries the world's full initial state and randomised parameters, so with `physics="logged"`
  the replay is exact. A robot (or `policy_node`) bag starts from its first joint state after the
  first command, on the nominal model; jumps in the log (episode resets in sim-to-sim) restart the
  replay from the logged state.
- `playback_frames`: set the logged joint states kinematically and render them.
- `reevaluate_policy`: feed the logged observations to an exported policy, run as the robot runs it
  (`batonlab.deploy.policy.OnnxPolicy`), and compare its actions with the logged ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np
import torch

from batonlab.env.env import BatonEnv
from batonlab.logs.bag_reader import BagError, BagLog, OdomSeries, quat_yaw
from batonlab.logs.sim_recorder import PARAM_FIELDS

PHYSICS_MODES = ("logged", "nominal", "randomized")
"""Model parameters of the replay: those stored in the bag, the task's nominal model, or a fresh
draw of the task's startup randomisation (a different robot; shows the sim-vs-log gap)."""

_JUMP_RAD = 0.1
"""A logged joint moving more than this [rad or m] plus 3·|qd|·Δt between two samples is a reset."""

_JUMP_M = 0.1
"""A logged base moving more than this [m] plus 3·|v|·Δt between two odometry samples is a reset."""


# The replay simulator.


def task_of(log: BagLog, task: str | None = None) -> str:
    task = task or log.metadata.get("task")
    if not task:
        raise BagError(f"{log.path}: the bag does not say which task it comes from; pass --task NAME")
    return task


def make_replay_env(log: BagLog, task: str | None = None, physics: str = "logged", seed: int = 0) -> BatonEnv:
    """One world of the bag's task (play configuration) with the requested physics parameters.

    Startup randomisation runs only for `physics="randomized"`; otherwise every randomisable model
    parameter (`sim_recorder.PARAM_FIELDS`, also those a reset event drew) is the nominal model's,
    and with "logged" the parameters stored in the bag are written over them.
    """
    from batonlab.tasks import get_task, list_tasks

    if physics not in PHYSICS_MODES:
        raise ValueError(f"physics must be one of {PHYSICS_MODES}, got {physics!r}")
    name = task_of(log, task)
    try:
        entry = get_task(name)
    except KeyError:
        raise BagError(f"{log.path}: task '{name}' is not registered; valid tasks: {[t.name for t in list_tasks()]}") from None
    cfg = entry.make_cfg(play=True)
    cfg.num_envs = 1
    cfg.seed = int(seed)
    cfg.sim.num_threads = 1
    if physics != "randomized":
        cfg.events = {k: v for k, v in cfg.events.items() if v.mode != "startup"}
    env = BatonEnv(cfg)
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
            if int(model.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
                qpos[int(model.jnt_qposadr[j])] = float(value)
    if base_quat is not None and model.njnt and int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE):
        adr = int(model.jnt_qposadr[0])
        qpos[adr + 3 : adr + 7] = torch.as_tensor(base_quat, dtype=torch.float64)
    return qpos


def logged_qvel(env: BatonEnv, names, velocities: np.ndarray) -> torch.Tensor:
    model = env.scene.model
    qvel = torch.zeros(model.nv, dtype=torch.float64)
    for name, value in zip(names, velocities):
        if name in env.scene.joint_names and np.isfinite(value):
            j = env.scene.joint_ids([name])[0]
            if int(model.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
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


# Open loop.


@dataclass
class OpenLoopResult:
    """The simulated vs. the logged trajectory of the commanded joints (and of a floating base), at the
    logged sample times.

    Joints whose position is unbounded (`continuous_joints`: unlimited hinges such as wheels) are
    compared by velocity: their position error grows without bound and tells nothing once a wheel
    slips, so `error`, `rmse*` and `max_abs_error` leave them out and `velocity_error` holds them.
    """

    joint_names: list[str]
    t: np.ndarray
    """(N,) sample times [s since bag start]."""
    logged_pos: np.ndarray
    """(N, J) [rad or m]."""
    sim_pos: np.ndarray
    logged_vel: np.ndarray
    sim_vel: np.ndarray
    command_t: np.ndarray
    """(M,) command log times [s]."""
    commands: np.ndarray
    """(M, J) targets in `joint_names` order: positions [rad or m], or velocities [rad/s] for `velocity_joints`."""
    physics: str
    initial_state: str
    """"metadata" (the bag's full sim state), "joint_states" (the first logged sample) or
    "joint_states+odom" (with the logged base pose and twist)."""
    segments: list[tuple[int, int]] = field(default_factory=list)
    """[start, end) sample ranges replayed from a logged state (more than one after resets in the log)."""
    notes: list[str] = field(default_factory=list)
    continuous_joints: list[str] = field(default_factory=list)
    """Joints without position limits (wheels): compared by velocity."""
    velocity_joints: list[str] = field(default_factory=list)
    """Joints driven by velocity servos: their commands are velocity targets [rad/s]."""
    base_t: np.ndarray | None = None
    """(N,) sample times of the base comparison (= `t`) [s]; None when the bag has no odometry or
    the robot no floating base."""
    logged_base_pos: np.ndarray | None = None
    """(N, 3) logged (odom) base position [m]; NaN where no odom sample is near."""
    sim_base_pos: np.ndarray | None = None
    """(N, 3) simulated base position [m]."""
    base_drift: np.ndarray | None = None
    """(N,) horizontal distance |sim_xy - odom_xy| [m], from 0 at each segment start."""
    yaw_drift: np.ndarray | None = None
    """(N,) simulated - logged heading, wrapped to [-pi, pi) [rad]."""

    @property
    def _position_cols(self) -> np.ndarray:
        return np.array([n not in self.continuous_joints for n in self.joint_names], dtype=bool)

    @property
    def error(self) -> np.ndarray:
        """(N, J) simulated minus logged position; NaN for `continuous_joints`."""
        err = self.sim_pos - self.logged_pos
        err[:, ~self._position_cols] = np.nan
        return err

    @property
    def velocity_error(self) -> np.ndarray:
        """(N, J) simulated minus logged velocity [rad/s or m/s]."""
        return self.sim_vel - self.logged_vel

    @property
    def rmse_per_joint(self) -> np.ndarray:
        """(J,) position RMSE [rad or m]; NaN for `continuous_joints`."""
        return _rms(self.error, axis=0)

    @property
    def velocity_rmse_per_joint(self) -> np.ndarray:
        """(J,) velocity RMSE [rad/s or m/s]."""
        return _rms(self.velocity_error, axis=0)

    @property
    def rmse(self) -> float:
        """Over all position-compared joints and samples [rad or m]."""
        return float(_rms(self.error))

    @property
    def rmse_over_time(self) -> np.ndarray:
        """(N,) RMS over position-compared joints at each sample."""
        return _rms(self.error, axis=1)

    @property
    def max_abs_error(self) -> float:
        err = np.abs(self.error)
        return float(np.nanmax(err)) if np.isfinite(err).any() else 0.0

    # Floating base.

    @property
    def has_base(self) -> bool:
        return self.base_drift is not None and bool(np.isfinite(self.base_drift).any())

    # The summaries below are NaN without a base comparison (`has_base` False).

    @property
    def final_base_drift(self) -> float:
        """Horizontal drift at the end of the longest replayed segment [m] (the log's last segment may be
        a single sample after a final reset, which says nothing)."""
        if not self.has_base:
            return float("nan")
        a, b = max(self.segments, key=lambda seg: seg[1] - seg[0]) if self.segments else (0, len(self.base_drift))
        drift = self.base_drift[a:b][np.isfinite(self.base_drift[a:b])]
        return float(drift[-1]) if drift.size else float("nan")

    @property
    def max_base_drift(self) -> float:
        """Largest horizontal drift [m]."""
        return float(np.nanmax(self.base_drift)) if self.has_base else float("nan")

    @property
    def max_yaw_drift(self) -> float:
        """Largest |heading drift| [rad]."""
        return float(np.nanmax(np.abs(self.yaw_drift))) if self.has_base else float("nan")

    @property
    def base_distance(self) -> float:
        """Horizontal distance the logged base travelled within the replayed segments [m]."""
        if not self.has_base:
            return float("nan")
        return float(sum(_path_length(self.logged_base_pos[a:b]) for a, b in self.segments))

    @property
    def base_drift_per_metre(self) -> float:
        """Drift at the end of each segment, summed, per metre the logged base travelled (NaN when it hardly moved)."""
        if not self.has_base:
            return float("nan")
        ends = [self.base_drift[a:b][np.isfinite(self.base_drift[a:b])] for a, b in self.segments]
        drift = sum(float(e[-1]) for e in ends if e.size)
        distance = self.base_distance
        return drift / distance if distance > 1e-3 else float("nan")


def _rms(values: np.ndarray, axis=None) -> np.ndarray:
    """RMS over the finite values (NaN where there are none), without numpy's empty-slice warnings."""
    finite = np.isfinite(values)
    count = finite.sum(axis=axis)
    total = np.where(finite, values, 0.0) ** 2
    total = total.sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, np.sqrt(total / np.maximum(count, 1)), np.nan)


def _path_length(xyz: np.ndarray) -> float:
    steps = np.linalg.norm(np.diff(xyz[:, :2], axis=0), axis=1)
    return float(np.nansum(steps))


def replay_open_loop(log: BagLog, env: BatonEnv | None = None, task: str | None = None, physics: str = "logged",
                     seed: int = 0) -> OpenLoopResult:
    """Drive the simulator with the logged joint commands from the logged initial state.

    Each joint command goes to its joint's actuator as it was logged: a position target to a
    position servo, a velocity target [rad/s] to a velocity servo (wheels). A robot with a floating
    base (a free root joint) starts each segment from the logged base pose and twist when the bag
    has odometry (`/odom`, read as `bag_format` says: the odom frame is the simulator's world, the
    twist is in the base frame), else from the IMU's orientation at the model's default position;
    with odometry the result also holds the base's drift from the log.

    Args:
        log: The bag.
        env: A replay env (`make_replay_env`); built here when None (and closed afterwards).
        task: Overrides the bag's task.
        physics: See `PHYSICS_MODES`.
        seed: Seed of the randomised physics.
    """
    log.require("open-loop replay", "joint_states", "joint_commands")
    own_env = env is None
    env = env or make_replay_env(log, task, physics, seed)
    try:
        return _open_loop(log, env, physics)
    finally:
        if own_env:
            env.close()


def _open_loop(log: BagLog, env: BatonEnv, physics: str) -> OpenLoopResult:
    js, cmds = log.joint_states, log.joint_commands
    names = log.command_joint_names
    if cmds.values.shape[1] != len(names):
        raise BagError(f"{log.path}: joint_commands carry {cmds.values.shape[1]} values but the bag names "
                       f"{len(names)} command joints {names}")
    try:
        actuators = env.scene.actuator_for_joints(names)
    except (KeyError, ValueError) as err:
        raise BagError(f"{log.path}: the logged command joints do not match task '{task_of(log)}': {err}") from None
    model = env.scene.model
    act = actuators.numpy()
    limited = model.actuator_ctrllimited[act].astype(bool)
    low = np.where(limited, model.actuator_ctrlrange[act, 0], -np.inf)
    high = np.where(limited, model.actuator_ctrlrange[act, 1], np.inf)
    cols = js.columns(names)
    continuous = _continuous_joints(model, env.scene.joint_ids(names))
    dt = float(model.opt.timestep)
    notes = []

    # Sample times: header stamps when they are usable (the state's own time), else log times;
    # odometry on the same clock as the joint states.
    odom = log.odom if _free_root(model) is not None else None
    use_stamps = _usable(js.stamp) and (odom is None or _usable(odom.stamp))
    t = js.stamp if use_stamps else js.t
    base = _LoggedBase(odom, odom.stamp if use_stamps else odom.t, env) if odom is not None else None
    commands = np.clip(cmds.values, low, high)
    finite = np.isfinite(commands).all(axis=1)
    cmd_t, commands = cmds.t[finite], commands[finite]
    if cmd_t.size == 0:
        raise BagError(f"{log.path}: no finite joint command to replay")
    eps = 0.25 * dt
    first = int(np.searchsorted(t, cmd_t[0] - eps))
    if first >= len(t) - 1:
        raise BagError(f"{log.path}: no joint states after the first command at t={cmd_t[0]:.3f} s")
    has_initial = "initial_state" in log.metadata and abs(t[first] - log.metadata["initial_state"].get("time", 0.0)) < eps
    pos, vel = js.position, js.velocity
    sim_pos = np.full((len(t), len(names)), np.nan)
    sim_vel = np.full_like(sim_pos, np.nan)
    sim_base = np.full((len(t), 4), np.nan)  # x, y, z, yaw
    ids = torch.zeros(1, dtype=torch.long)
    qadr, dadr = env.scene.qpos_adr(names).numpy(), env.scene.dof_adr(names).numpy()
    segments: list[tuple[int, int]] = []
    if physics == "logged" and not log.metadata.get("physics") and log.metadata.get("source") != "sim":
        notes.append("the bag holds no physics parameters: replayed on the nominal model")
        physics = "nominal"
    if base is not None and base.planar:
        notes.append("the odometry is planar (z = 0): the base starts at the model's default height")

    def start_at(k: int, from_metadata: bool) -> None:
        if from_metadata:
            state = log.metadata["initial_state"]
            qpos, qvel = torch.as_tensor(state["qpos"], dtype=torch.float64), torch.as_tensor(state["qvel"], dtype=torch.float64)
        else:
            logged_base = base.at(t[k]) if base is not None else None
            quat = logged_base[1] if logged_base is not None else _imu_at(log, t[k])
            qpos, qvel = logged_qpos(env, js.names, pos[k], quat), logged_qvel(env, js.names, vel[k])
            if logged_base is not None:
                base.set_state(qpos, qvel, *logged_base)
        env.sim.reset(ids, qpos[None], qvel[None])
        segments.append((k, len(t)))

    def sample(k: int) -> None:
        sim_pos[k], sim_vel[k] = env.sim.qpos[0, qadr].double().numpy(), env.sim.qvel[0, dadr].double().numpy()
        if base is not None:
            sim_base[k] = base.sim_pose()

    start_at(first, has_initial)
    sample(first)
    clock = t[first]
    for k in range(first + 1, len(t)):
        jump = _is_jump(pos[k - 1, cols], pos[k, cols], vel[k - 1, cols], vel[k, cols], t[k] - t[k - 1], continuous)
        if jump or (base is not None and base.jumps(t[k - 1], t[k])):
            segments[-1] = (segments[-1][0], k)
            start_at(k, False)
            clock = t[k]
        else:
            n_steps = int(round((t[k] - clock) / dt))
            for run_start, run_len in _runs(cmd_t, clock, n_steps, dt, eps):
                active = int(np.searchsorted(cmd_t, run_start + eps, side="right")) - 1
                if active >= 0:
                    env.sim.ctrl[0, actuators] = torch.as_tensor(commands[active], dtype=torch.float32)
                set_markers(env, log, run_start)
                env.sim.step(run_len)
            clock += n_steps * dt
        sample(k)
    if len(segments) > 1:
        notes.append(f"{len(segments) - 1} jumps in the logged joint states (resets): replay restarted from the log there")
    keep = slice(first, len(t))
    result = OpenLoopResult(
        joint_names=list(names), t=t[keep], logged_pos=pos[keep][:, cols], sim_pos=sim_pos[keep],
        logged_vel=vel[keep][:, cols], sim_vel=sim_vel[keep], command_t=cmd_t, commands=commands, physics=physics,
        initial_state="metadata" if has_initial else "joint_states+odom" if base is not None else "joint_states",
        segments=[(a - first, b - first) for a, b in segments], notes=notes,
        continuous_joints=[n for n, c in zip(names, continuous) if c],
        velocity_joints=[n for n, a in zip(names, act) if _is_velocity_servo(model, int(a))],
    )
    if result.continuous_joints:
        notes.append(f"{', '.join(result.continuous_joints)}: continuous joints, compared by velocity "
                     "(their positions are unbounded)")
    if base is not None:
        logged = np.array([base.pose_near(x) for x in result.t])  # x, y, z, yaw
        simulated = sim_base[keep]
        result.base_t = result.t
        result.logged_base_pos, result.sim_base_pos = logged[:, :3], simulated[:, :3]
        result.base_drift = np.linalg.norm(simulated[:, :2] - logged[:, :2], axis=1)
        result.yaw_drift = _wrap(simulated[:, 3] - logged[:, 3])
    return result


def _usable(stamp: np.ndarray) -> bool:
    """Header stamps that can serve as sample times: finite, non-decreasing and not all equal."""
    return bool(np.all(np.isfinite(stamp)) and np.all(np.diff(stamp) >= 0) and stamp[-1] > stamp[0])


def _free_root(model: mujoco.MjModel) -> tuple[int, int] | None:
    """(qpos, dof) address of the robot's free root joint (the model's first joint), or None for a fixed base."""
    if model.njnt and int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE):
        return int(model.jnt_qposadr[0]), int(model.jnt_dofadr[0])
    return None


def _continuous_joints(model: mujoco.MjModel, joint_ids) -> np.ndarray:
    """(J,) bool: hinges without limits (wheels), whose positions grow without bound."""
    ids = np.asarray(joint_ids, dtype=int)
    return (model.jnt_type[ids] == int(mujoco.mjtJoint.mjJNT_HINGE)) & ~model.jnt_limited[ids].astype(bool)


def _is_velocity_servo(model: mujoco.MjModel, actuator: int) -> bool:
    """A velocity servo: affine bias on the joint velocity only (MuJoCo's `<velocity>` actuator)."""
    bias = model.actuator_biasprm[actuator]
    return int(model.actuator_biastype[actuator]) == int(mujoco.mjtBias.mjBIAS_AFFINE) and bias[1] == 0.0 and bias[2] != 0.0


def _wrap(angle: np.ndarray) -> np.ndarray:
    return (np.asarray(angle) + np.pi) % (2.0 * np.pi) - np.pi


class _LoggedBase:
    """The logged odometry of a floating base, looked up at replay sample times.

    Args:
        odom: The bag's odometry.
        times: Its sample times on the joint states' clock [s].
        env: The replay env (its free root joint is set from the odometry).
    """

    _MAX_AGE_S = 0.1
    """An odometry sample further than this from a sample time does not describe the base there [s]."""

    def __init__(self, odom: OdomSeries, times: np.ndarray, env: BatonEnv):
        self.times = times
        self.position = odom.position
        self.orientation = odom.orientation_wxyz / np.linalg.norm(odom.orientation_wxyz, axis=1, keepdims=True)
        self.linear_w, self.angular_b = odom.twist_world_body()
        self.yaw = odom.yaw
        self.planar = bool(np.all(np.abs(odom.position[:, 2]) < 1e-6))
        self.env = env
        self.qadr, self.dadr = _free_root(env.scene.model)
        self.default_z = float(env.default_qpos[self.qadr + 2])

    def _index(self, t: float) -> int | None:
        """The odometry sample nearest to `t`, or None if none is within `_MAX_AGE_S`."""
        k = int(np.searchsorted(self.times, t))
        near = [i for i in (k - 1, k) if 0 <= i < len(self.times)]
        if not near:
            return None
        i = min(near, key=lambda i: abs(self.times[i] - t))
        return i if abs(self.times[i] - t) <= self._MAX_AGE_S else None

    def at(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """(position, orientation wxyz, linear velocity in the world, angular velocity in the body) at `t`."""
        i = self._index(t)
        if i is None:
            return None
        return self.position[i], self.orientation[i], self.linear_w[i], self.angular_b[i]

    def pose_near(self, t: float) -> np.ndarray:
        """(x, y, z, yaw) logged at `t`; NaN without a sample near it."""
        i = self._index(t)
        return np.full(4, np.nan) if i is None else np.array([*self.position[i], self.yaw[i]])

    def set_state(self, qpos: torch.Tensor, qvel: torch.Tensor, position, orientation, linear_w, angular_b) -> None:
        """Write the logged base pose and twist into a full qpos / qvel (in place)."""
        q, d = self.qadr, self.dadr
        qpos[q : q + 3] = torch.as_tensor(position, dtype=torch.float64)
        if self.planar:
            qpos[q + 2] = self.default_z
        qpos[q + 3 : q + 7] = torch.as_tensor(orientation, dtype=torch.float64)
        qvel[d : d + 3] = torch.as_tensor(linear_w, dtype=torch.float64)
        qvel[d + 3 : d + 6] = torch.as_tensor(angular_b, dtype=torch.float64)

    def sim_pose(self) -> np.ndarray:
        """(x, y, z, yaw) of the simulated base."""
        qpos = self.env.sim.qpos[0].double().numpy()
        q = self.qadr
        return np.array([*qpos[q : q + 3], quat_yaw(qpos[q + 3 : q + 7])])

    def jumps(self, t0: float, t1: float) -> bool:
        """Whether the logged base moved between `t0` and `t1` faster than its logged velocity allows (a reset)."""
        i, j = self._index(t0), self._index(t1)
        if i is None or j is None or i == j:
            return False
        speed = max(np.linalg.norm(self.linear_w[i]), np.linalg.norm(self.linear_w[j]))
        step = np.linalg.norm(self.position[j] - self.position[i])
        return bool(step > _JUMP_M + 3.0 * speed * abs(self.times[j] - self.times[i]))


def _runs(cmd_t: np.ndarray, clock: float, n_steps: int, dt: float, eps: float):
    """Split `n_steps` physics steps from `clock` into runs during which the active command is constant."""
    if n_steps <= 0:
        return
    starts = clock + dt * np.arange(n_steps)
    active = np.searchsorted(cmd_t, starts + eps, side="right")
    change = np.flatnonzero(np.diff(active)) + 1
    bounds = [0, *change.tolist(), n_steps]
    for a, b in zip(bounds[:-1], bounds[1:]):
        yield float(starts[a]), b - a


def _is_jump(q0, q1, qd0, qd1, dt, continuous=None) -> bool:
    """Whether a joint moved between two samples faster than its logged velocities allow (a reset).

    `continuous` (bool per joint) marks joints without limits (wheels), whose encoders may wrap:
    their step is taken modulo a turn.
    """
    speed = np.nan_to_num(np.maximum(np.abs(qd0), np.abs(qd1)), nan=0.0)
    step = np.asarray(q1, dtype=np.float64) - np.asarray(q0, dtype=np.float64)
    if continuous is not None and np.any(continuous):
        step = np.where(continuous, _wrap(step), step)
    return bool(np.any(np.abs(step) > _JUMP_RAD + 3.0 * speed * max(dt, 0.0)))


def _imu_at(log: BagLog, t: float) -> np.ndarray | None:
    if log.imu is None or log.imu.t.size == 0:
        return None
    k = max(0, int(np.searchsorted(log.imu.t, t, side="right")) - 1)
    return log.imu.orientation_wxyz[k]


# State playback.


def playback_frames(log: BagLog, env: BatonEnv, size: tuple[int, int] = (240, 320), fps: float = 30.0,
                    max_frames: int = 3000) -> list[np.ndarray]:
    """Render the logged joint states (set kinematically) at `fps`, from the bag's first to last sample."""
    log.require("state playback", "joint_states")
    js = log.joint_states
    if js.t[-1] - js.t[0] <= 0:
        times = js.t[:1]
    else:
        times = np.arange(js.t[0], js.t[-1] + 1e-9, 1.0 / fps)[:max_frames]
    ids = torch.zeros(1, dtype=torch.long)
    frames = []
    for t in times:
        k = max(0, int(np.searchsorted(js.t, t + 1e-9, side="right")) - 1)
        qpos = logged_qpos(env, js.names, js.position[k], _imu_at(log, t))
        env.sim.reset(ids, qpos[None].float(), torch.zeros(1, env.scene.model.nv))
        set_markers(env, log, t)
        frames.append(env.render([0], size)[0])
    return frames


def write_playback(log: BagLog, path: str | Path, task: str | None = None, size=(240, 320), fps: float = 30.0,
                   webm: bool = False) -> list[Path]:
    """State playback of the bag as an MP4 (see `playback_frames`), and a WebM copy for browsers.

    OpenCV's MP4 encoder (MPEG-4 part 2) is not played by browsers; the report page embeds the VP8
    WebM written next to it when `webm` is set.
    """
    from batonlab.sim.render import write_mp4

    env = make_replay_env(log, task, "nominal")
    try:
        frames = playback_frames(log, env, size, fps)
    finally:
        env.close()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_mp4(path, frames, fps=fps)
    paths = [path]
    if webm and _write_webm(path.with_suffix(".webm"), frames, fps):
        paths.append(path.with_suffix(".webm"))
    return paths


def _write_webm(path: Path, frames, fps: float) -> bool:
    import cv2

    height, width = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"vp80"), float(fps), (width, height))
    if not writer.isOpened():
        return False
    try:
        for frame in frames:
            writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    finally:
        writer.release()
    return True


# Policy re-evaluation.


@dataclass
class PolicyEvalResult:
    """An exported policy's actions on the logged observations vs. the logged actions."""

    t: np.ndarray
    """(N,) times of the steps where the logged policy ran [s since bag start]."""
    logged: np.ndarray
    """(N, A) logged raw actions."""
    replayed: np.ndarray
    """(N, A) the export's raw actions for the same observations."""
    action_names: list[str]
    target_diff: np.ndarray | None
    """(N, A) post-processed targets minus logged filtered targets of the policy's joints, where the step ran
    unfiltered (run/sim); NaN elsewhere."""
    export_dir: Path
    notes: list[str] = field(default_factory=list)

    @property
    def diff(self) -> np.ndarray:
        return self.replayed - self.logged

    @property
    def max_abs_diff(self) -> float:
        return float(np.abs(self.diff).max()) if self.diff.size else 0.0

    @property
    def rms_per_action(self) -> np.ndarray:
        return np.sqrt(np.mean(self.diff**2, axis=0))


def reevaluate_policy(log: BagLog, export_dir: str | Path | None = None) -> PolicyEvalResult:
    """Run the exported policy on every logged observation, as the robot runs it, and compare the actions.

    The policy runs in the robot-side runtime's `OnnxPolicy` (same session options, one observation per
    call), and its actions go through the runtime's `ActionProcessor`.

    Args:
        log: The bag.
        export_dir: Folder with manifest.json + policy.onnx; default: the bag's `export_dir` metadata.
    """
    from batonlab.deploy import ManifestError, load_manifest
    from batonlab.deploy.actions import ActionProcessor
    from batonlab.deploy.manifest import sha256_file
    from batonlab.deploy.policy import OnnxPolicy

    log.require("policy re-evaluation", "policy_step")
    export_dir = export_dir or log.metadata.get("export_dir")
    if not export_dir:
        raise BagError(f"{log.path}: policy re-evaluation needs an exported policy (--policy EXPORT_DIR)")
    try:
        manifest = load_manifest(export_dir)
        policy = OnnxPolicy(manifest)
    except ManifestError as err:
        raise BagError(f"policy re-evaluation: {err}") from None
    steps = log.policy_steps
    notes = []
    if steps.observation.shape[1] != manifest.obs_dim:
        raise BagError(f"{log.path}: logged observations have {steps.observation.shape[1]} values, the policy in "
                       f"{export_dir} reads {manifest.obs_dim}: not the policy (or task) of this bag")
    if steps.action_raw.shape[1] not in (0, manifest.action_dim):
        raise BagError(f"{log.path}: logged actions have {steps.action_raw.shape[1]} values, the policy writes "
                       f"{manifest.action_dim}")
    sha = log.metadata.get("manifest_sha256")
    if log.metadata.get("manifest_source") == "export" and sha:
        if sha256_file(Path(export_dir) / "manifest.json") != sha:
            notes.append("the bag was recorded with a different manifest.json than the one re-evaluated")
    ran = np.isfinite(steps.action_raw).all(axis=1) & (steps.action_raw.shape[1] > 0) & np.isfinite(steps.observation).all(axis=1)
    if not ran.any():
        raise BagError(f"{log.path}: no step of the bag ran the policy (all passive/stop)")
    replayed = np.array([policy(obs) for obs in steps.observation[ran].astype(np.float32)])
    target_diff = None
    # The robot side logs its whole command: the policy's joints, then the joints it holds (their own targets).
    if steps.action_filtered.shape[1] in (manifest.action_dim, manifest.action_dim + len(manifest.held_joints.names)):
        process = ActionProcessor(manifest)
        unfiltered = np.array([s in ("run", "sim") for s in np.array(steps.safety_state)[ran]])
        targets = np.array([process(a) for a in replayed])
        if log.metadata.get("source") == "sim":
            # Simulation logs the targets after the actuators' control range, where MuJoCo applies them.
            ctrl = manifest.ctrl_range
            targets = np.clip(targets, ctrl[:, 0], ctrl[:, 1])
        logged = steps.action_filtered[ran][:, : manifest.action_dim]
        target_diff = np.where(unfiltered[:, None], targets - logged, np.nan)
    return PolicyEvalResult(steps.t[ran], steps.action_raw[ran].astype(np.float64), replayed.astype(np.float64),
                            list(manifest.joint_names), target_diff, Path(export_dir), notes)
