# SPDX-License-Identifier: BSD-3-Clause
"""From bags to `mujoco.sysid` data: one `ModelSequences` per stretch of a bag between resets.

A stretch starts at a logged joint state and runs to the next reset (a jump in the logged joints, as open-loop
replay finds them). Its initial state is the bag's full initial state where the bag carries one for that instant
(`play record=`), else the logged joint positions and velocities over the bag's initial (or the model's default)
pose. Its control is the logged joint commands held at their log times (zero-order hold) on the physics step grid;
actuators the bag does not command keep the control its metadata gives (`uncommanded_ctrl`, written by
`play record=`), else 0. Its measurements are the logged joint positions and velocities at their own time stamps.

- A floating base (the wheel-legged robot) is cut into short windows, each started from the logged joint states and
  the logged odometry's base pose and twist (`logs.logged_base`, as open-loop replay starts from them).
- A `policy_node` bag of a sim-to-sim run starts with the sim robot's warm-up, in which it holds its pose whatever
  the commands: stretches before the policy's first episode (its steps numbered 0, the later ones from 1) are left
  out.
- Where the logged velocities are mostly noise (`velocities_are_noisy`: a tenth of their spread or more, and several
  times the error of the positions' local derivative), a stretch not started from the bag's initial state starts
  from a quadratic fit of the logged positions around it and its derivative, and only positions are measured: the
  library normalises each signal by its magnitude, so noisy velocities would outweigh positions in the fit.
- With a delay to search (`max_delay_s`), the commanded actuators keep a history of their past targets: at a reset
  their joints' positions (as `batonlab.sim.mujoco_cpu` resets delayed servos), in a window cut from a stretch the
  logged commands before it.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np
from mujoco import sysid

from batonlab.logs.bag_reader import BagError, BagLog
from batonlab.logs.logged_base import LoggedBase, free_root
from batonlab.logs.open_loop import is_jump, usable_stamps
from batonlab.robots.assets import compile_spec, quiet_compiler
from batonlab.robots.fitted import FitOverlayError, position_actuator, set_command_delay
from batonlab.sim.joints import is_position_servo

MIN_SEGMENT_S = 0.2
"""Stretches shorter than this between resets are dropped [s]."""

FLOATING_WINDOW_S = 0.5
"""A floating base's stretches are cut into windows this long [s]: each starts from the logged joints and odometry,
so that an open-loop replay of a balancing robot, which drifts and falls over seconds, stays near the log."""


START_FIT_S = 0.08
"""With noisy velocities, a window starts from a quadratic fit of the logged positions within this of it [s]."""

NOISY_VELOCITY_RATIO = 4.0
"""Logged velocities count as noisy where their sample-to-sample noise is this many times the error of the
positions' local fit's derivative."""


@dataclass
class Segment:
    """A stretch of one bag, as `mujoco.sysid` fits it."""

    bag: str
    index: int
    """Its place among the bag's stretches."""
    joints: list[str]
    sequence: sysid.ModelSequences
    duration_s: float
    command_joints: list[str]
    """The joints the bag commands: a fitted command delay delays their actuators."""
    max_delay_s: float
    """The longest command delay the segment's model has room for [s] (0: none searched)."""
    noisy_velocities: bool = False
    """Its start state came from the logged positions' local fit, and only positions are compared."""


def bag_segments(log: BagLog, spec: mujoco.MjSpec, joints: list[str] | None = None, max_delay_s: float = 0.0,
                 window_s: float = FLOATING_WINDOW_S, noisy_velocities: bool | None = None) -> list[Segment]:
    """The stretches of `log` between resets, over the scene `spec` (a floating base's cut into windows).

    Args:
        log: A bag with joint states and joint commands (`play record=`, `policy_node`).
        spec: The scene as training builds it (`batonlab.env.scene.scene_spec`); with `max_delay_s`, its commanded
            actuators get a history of that length (and no delay yet).
        joints: The joints compared (default: the logged command joints).
        max_delay_s: The longest command delay a fit may search [s].
        window_s: The length of a floating base's windows [s].
        noisy_velocities: Whether the logged joint velocities are too noisy to start a window from or to compare
            (None: `velocities_are_noisy` decides from the bag).
    """
    log.require("system identification", "joint_states", "joint_commands")
    if max_delay_s > 0:
        set_command_delay(spec, log.command_joint_names, 0.0, max_delay_s)
    model = compile_spec(spec)
    js, cmds = log.joint_states, log.joint_commands
    command_joints = log.command_joint_names
    joints = list(joints or command_joints)
    missing = [j for j in {*joints, *command_joints} if j not in js.names or mujoco.mj_name2id(
        model, mujoco.mjtObj.mjOBJ_JOINT, j) < 0]
    if missing:
        raise BagError(f"{log.path}: joints {sorted(missing)} are not both in the bag's joint states and the model")
    actuators = _command_actuators(spec, model, command_joints)
    base = None
    if free_root(model) is not None:
        log.require("system identification of a floating base (its pose at each window's start)", "odom")
        stamps = usable_stamps(js.stamp) and usable_stamps(log.odom.stamp)
        base = LoggedBase(log.odom, log.odom.stamp if stamps else log.odom.t, model, model.qpos0)
    t = js.stamp if usable_stamps(js.stamp) and (base is None or stamps) else js.t
    finite = np.isfinite(cmds.values).all(axis=1)
    cmd_t, commands = cmds.t[finite], cmds.values[finite]
    if cmd_t.size == 0:
        raise BagError(f"{log.path}: no finite joint command")
    cols = js.columns(joints)
    all_cols = js.columns([j for j in js.names if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, j) >= 0])
    pos, vel = js.position, js.velocity
    dt = float(model.opt.timestep)
    eps = 0.25 * dt
    first = int(np.searchsorted(t, cmd_t[0] - eps))
    bounds = [first]
    for k in range(first + 1, len(t)):
        if (is_jump(pos[k - 1, cols], pos[k, cols], vel[k - 1, cols], vel[k, cols], t[k] - t[k - 1])
                or (base is not None and base.jumps(t[k - 1], t[k]))):
            bounds.append(k)
    bounds.append(len(t))
    resets = np.asarray(bounds)  # where stretches start (and the end), before windows cut them
    if noisy_velocities is None:
        noisy_velocities = velocities_are_noisy(t, pos[:, cols], vel[:, cols])
    start_fit_s = START_FIT_S if noisy_velocities else 0.0
    if base is not None:
        bounds = _windows(bounds, t, window_s)
    first_episode = _first_episode_stamp(log)
    initial = log.metadata.get("initial_state")
    segments = []
    for index, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        if b - a < 3 or t[b - 1] - t[a] < MIN_SEGMENT_S or 0.5 * (t[a] + t[b - 1]) < first_episode:
            continue
        from_metadata = (index == 0 and initial is not None and abs(t[a] - initial.get("time", 0.0)) < eps
                         and len(initial.get("qpos", ())) == model.nq)
        after = int(np.searchsorted(resets, a, side="right"))
        lo, hi = int(resets[after - 1]), int(resets[after])
        start_pos, start_vel = _local_fit(t, pos, vel, a, lo, hi, start_fit_s)
        qpos, qvel = _start_state(model, log, js.names, all_cols, start_pos, start_vel,
                                  initial if from_metadata else None)
        if base is not None and not from_metadata:
            logged_base = base.at(t[a])
            if logged_base is None:
                continue  # no odometry near the window's start
            base.set_state(qpos, qvel, *logged_base)
        ctrl_t, ctrl = _held_control(model, actuators, cmd_t - t[a], commands, log.metadata.get("uncommanded_ctrl", {}),
                                     t[b - 1] - t[a], dt, eps)
        x0 = _initial_state(model, qpos, qvel, None if a == lo else (actuators, cmd_t - t[a], commands))
        control = sysid.TimeSeries(ctrl_t, ctrl)
        names = [(j, sysid.SignalType.MjStateQPos) for j in joints]
        data = pos[a:b, cols]
        if not noisy_velocities:
            names += [(j, sysid.SignalType.MjStateQVel) for j in joints]
            data = np.concatenate([data, vel[a:b, cols]], axis=1)
        measured = sysid.TimeSeries.from_names(t[a:b] - t[a], data, model, names)
        name = f"{log.path.name}#{index}"
        with quiet_compiler():
            sequence = sysid.ModelSequences(name, spec, name, x0, control, measured, allow_missing_sensors=True)
        segments.append(Segment(str(log.path), index, joints, sequence, float(t[b - 1] - t[a]), command_joints,
                                max_delay_s, noisy_velocities))
    if not segments:
        raise BagError(f"{log.path}: no stretch of at least {MIN_SEGMENT_S} s between resets")
    return segments


def velocities_are_noisy(t: np.ndarray, pos: np.ndarray, vel: np.ndarray, fit_s: float = START_FIT_S) -> bool:
    """Whether the logged velocities (T, J) [rad/s] at times t (T,) [s] carry white noise of a tenth of their spread or
    more, and `NOISY_VELOCITY_RATIO` times the error of the derivative of a quadratic fit of the logged positions
    (T, J) [rad] within `fit_s` of a sample."""
    if len(t) < 5:
        return False
    dt = float(np.median(np.diff(t)))
    tau = dt * np.arange(-round(fit_s / dt), round(fit_s / dt) + 1)
    noise = np.nansum(_white_noise_std(vel))
    slope_error = np.nansum(_white_noise_std(pos)) / np.sqrt(np.sum(tau ** 2))
    return bool(noise > NOISY_VELOCITY_RATIO * slope_error and noise > 0.1 * np.nansum(np.nanstd(vel, axis=0)))


# Private functions.


def _white_noise_std(x: np.ndarray) -> np.ndarray:
    """Per column of (T, J) samples: the standard deviation of white noise that would give their second differences
    (a robust estimate: median absolute value; a smooth signal's own second differences count as noise)."""
    return 1.4826 * np.nanmedian(np.abs(np.diff(x, 2, axis=0)), axis=0) / np.sqrt(6.0)


def _local_fit(t, pos, vel, k: int, lo: int, hi: int, half_s: float):
    """Joint positions and velocities at sample `k`: logged (`half_s` 0, or fewer than 5 finite samples near it), else
    a quadratic least-squares fit of the finite logged positions at samples lo..hi-1 within `half_s` of t[k], and its
    derivative."""
    if half_s <= 0:
        return pos[k], vel[k]
    near = np.arange(lo, hi)[np.abs(t[lo:hi] - t[k]) <= half_s + 1e-9]
    near = near[np.isfinite(pos[near]).all(axis=1)]
    if near.size < 5:
        return pos[k], vel[k]
    tau = t[near] - t[k]
    coef, *_ = np.linalg.lstsq(np.stack([np.ones_like(tau), tau, tau ** 2], axis=1), pos[near], rcond=None)
    fitted = np.isfinite(coef[:2]).all(axis=0)
    return np.where(fitted, coef[0], pos[k]), np.where(fitted, coef[1], vel[k])


def _windows(bounds: list[int], t: np.ndarray, window_s: float) -> list[int]:
    """`bounds` (sample indices where stretches start, and the end) with each stretch cut every `window_s` seconds."""
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        starts = np.searchsorted(t[a:b], t[a] + window_s * np.arange(max(1, int((t[b - 1] - t[a]) // window_s))))
        out += (a + np.unique(starts)).tolist()
    return out + [bounds[-1]]


def _first_episode_stamp(log: BagLog) -> float:
    """The joint-state stamp the first step of episode 1 used, where the steps also count an episode 0 (a sim robot's
    warm-up before it); else -inf."""
    steps = log.policy_steps
    if steps is None or not (steps.episode == 0).any() or not (steps.episode >= 1).any():
        return -np.inf
    k = int(np.argmax(steps.episode >= 1))
    return float(steps.input_stamp[k] if np.isfinite(steps.input_stamp[k]) else steps.t[k])


def _command_actuators(spec: mujoco.MjSpec, model: mujoco.MjModel, joints: list[str]) -> np.ndarray:
    """The actuator id of each logged command joint (its position servo, else its only actuator)."""
    ids = []
    for joint in joints:
        try:
            ids.append(mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, position_actuator(spec, joint).name))
            continue
        except FitOverlayError:
            pass
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint)
        found = [a for a in range(model.nu) if model.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
                 and model.actuator_trnid[a, 0] == jid]
        if len(found) != 1:
            raise BagError(f"joint {joint!r} is driven by {len(found)} actuators; a command needs exactly one")
        ids.append(found[0])
    return np.asarray(ids)


def _initial_state(model: mujoco.MjModel, qpos: np.ndarray, qvel: np.ndarray, logged=None) -> np.ndarray:
    """The full physics state at `qpos`, `qvel`, time 0, with the delayed actuators' past targets: the logged commands
    before time 0 where `logged` = (actuators, command times [s] relative to 0, (N, A) commands) is given (a window
    cut from a stretch), else, as after a reset, each delayed position servo's joint position (and 0 for others)."""
    data = mujoco.MjData(model)
    data.qpos[:], data.qvel[:] = qpos, qvel
    dt = float(model.opt.timestep)
    for a in range(model.nu):
        n = int(model.actuator_history[a, 0])
        if n == 0:
            continue
        if logged is not None and a in logged[0]:
            actuators, cmd_t, commands = logged
            past = dt * np.arange(-n, 0)  # the history's sample times before 0 (mj_initCtrlHistory's default)
            active = np.clip(np.searchsorted(cmd_t, past + 0.25 * dt, side="right") - 1, 0, None)
            values = commands[active, list(actuators).index(a)]
        elif is_position_servo(model, a):
            values = np.full(n, qpos[model.jnt_qposadr[model.actuator_trnid[a, 0]]])
        else:
            continue
        mujoco.mj_initCtrlHistory(model, data, a, None, values)
    state = np.empty(mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(model, data, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    return state


def _start_state(model, log: BagLog, names: list[str], cols, pos, vel, initial: dict | None):
    """The full state where a stretch starts: the bag's initial state, else the logged joints over its initial pose
    (a stowed arm the bag does not log stays where it started) or over the model's default pose."""
    if initial is not None:
        return np.asarray(initial["qpos"], dtype=float), np.asarray(initial["qvel"], dtype=float)
    start = log.metadata.get("initial_state", {}).get("qpos")
    qpos = np.asarray(start, dtype=float).copy() if start is not None and len(start) == model.nq else model.qpos0.copy()
    qvel = np.zeros(model.nv)
    for c in cols:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, names[c])
        qpos[model.jnt_qposadr[jid]], qvel[model.jnt_dofadr[jid]] = pos[c], vel[c]
    if not (np.isfinite(qpos).all() and np.isfinite(qvel).all()):
        raise BagError(f"{log.path}: a non-finite joint state where a stretch starts")
    return qpos, qvel


def _held_control(model, actuators, cmd_t, commands, uncommanded: dict, span_s: float, dt: float, eps: float):
    """(times, (steps + 1, nu) control): the active command at each physics step, on the grid 0, dt, … ≥ span."""
    steps = int(np.ceil(span_s / dt - 1e-6))
    grid = dt * np.arange(steps + 1)
    active = np.searchsorted(cmd_t, grid + eps, side="right") - 1
    ctrl = np.zeros((steps + 1, model.nu))
    for name, value in uncommanded.items():
        a = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, name)
        if a >= 0:
            ctrl[:, a] = value
    ctrl[:, actuators] = commands[np.clip(active, 0, None)]
    low, high = model.actuator_ctrlrange[:, 0], model.actuator_ctrlrange[:, 1]
    limited = model.actuator_ctrllimited.astype(bool)
    ctrl[:, limited] = np.clip(ctrl[:, limited], low[limited], high[limited])
    times = grid.copy()
    times[-1] -= 1e-9  # `TimeSeries.resample` counts ceil(span / dt) + 1 samples; exactly at the end can add one
    return times, ctrl
