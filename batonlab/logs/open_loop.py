# SPDX-License-Identifier: BSD-3-Clause
"""Open-loop replay: drive the simulator with a bag's logged joint commands from the logged state.

Start the task's simulator from the logged initial state and drive it with the logged joint
commands (zero-order hold at their log times, at the physics rate); compare the simulated joint
trajectory with the logged one. A bag written by `batonlab play record=DIR` carries the world's full
initial state and randomised parameters, so with `physics="logged"` the replay is exact. A robot (or
`policy_node`) bag starts from its first joint state after the first command, on the nominal model;
jumps in the log (episode resets in sim-to-sim) restart the replay from the logged state. A floating
base follows the logged odometry (`logged_base.py`); the result is `open_loop_result.OpenLoopResult`.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from batonlab.env.env import BatonEnv
from batonlab.logs.bag_reader import BagError, BagLog
from batonlab.logs.logged_base import LoggedBase, free_root
from batonlab.logs.open_loop_result import OpenLoopResult
from batonlab.logs.replay_env import imu_orientation_at, logged_qpos, logged_qvel, set_markers, task_of

_JUMP_RAD = 0.1
"""A logged joint moving more than this [rad or m] plus 3·|qd|·Δt between two samples is a reset."""


def replay_open_loop(log: BagLog, env: BatonEnv, physics: str = "logged") -> OpenLoopResult:
    """Drive the simulator with the logged joint commands from the logged initial state.

    Each joint command goes to its joint's actuator as it was logged: a position target to a
    position servo, a velocity target [rad/s] to a velocity servo (wheels). A robot with a floating
    base (a free root joint) starts each segment from the logged base pose and twist when the bag
    has odometry (`/odom`, read as `bag_format` says: the odom frame is the simulator's world, the
    twist is in the base frame), else from the IMU's orientation at the model's default position;
    with odometry the result also holds the base's drift from the log.

    Args:
        log: The bag.
        env: A replay env (`make_replay_env`, or `batonlab.tasks.replay.replay_env_for` by task name).
        physics: The physics `env` was built with (see `PHYSICS_MODES`), as the result reports it.
    """
    log.require("open-loop replay", "joint_states", "joint_commands")
    return _open_loop(log, env, physics)


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
    low, high = (bound.numpy() for bound in env.scene.actuator_ctrl_range(actuators, dtype=torch.float64))
    cols = js.columns(names)
    continuous = _continuous_joints(model, env.scene.joint_ids(names))
    dt = float(model.opt.timestep)
    notes = []

    # Sample times: header stamps when they are usable (the state's own time), else log times;
    # odometry on the same clock as the joint states.
    odom = log.odom if free_root(model) is not None else None
    use_stamps = usable_stamps(js.stamp) and (odom is None or usable_stamps(odom.stamp))
    t = js.stamp if use_stamps else js.t
    base = (LoggedBase(odom, odom.stamp if use_stamps else odom.t, model, env.default_qpos.cpu().numpy())
            if odom is not None else None)
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
            quat = logged_base[1] if logged_base is not None else imu_orientation_at(log, t[k])
            qpos, qvel = logged_qpos(env, js.names, pos[k], quat), logged_qvel(env, js.names, vel[k])
            if logged_base is not None:
                base.set_state(qpos, qvel, *logged_base)
        env.sim.reset(ids, qpos[None], qvel[None])
        segments.append((k, len(t)))

    def sample(k: int) -> None:
        sim_pos[k], sim_vel[k] = env.sim.qpos[0, qadr].double().numpy(), env.sim.qvel[0, dadr].double().numpy()
        if base is not None:
            sim_base[k] = base.sim_pose(env.sim.qpos[0].double().numpy())

    start_at(first, has_initial)
    sample(first)
    clock = t[first]
    for k in range(first + 1, len(t)):
        jump = is_jump(pos[k - 1, cols], pos[k, cols], vel[k - 1, cols], vel[k, cols], t[k] - t[k - 1], continuous)
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


def usable_stamps(stamp: np.ndarray) -> bool:
    """Header stamps that can serve as sample times: finite, non-decreasing and not all equal."""
    return bool(np.all(np.isfinite(stamp)) and np.all(np.diff(stamp) >= 0) and stamp[-1] > stamp[0])


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


def is_jump(q0, q1, qd0, qd1, dt, continuous=None) -> bool:
    """Whether a joint moved between two samples faster than its logged velocities allow (a reset).

    `continuous` (bool per joint) marks joints without limits (wheels), whose encoders may wrap:
    their step is taken modulo a turn.
    """
    speed = np.nan_to_num(np.maximum(np.abs(qd0), np.abs(qd1)), nan=0.0)
    step = np.asarray(q1, dtype=np.float64) - np.asarray(q0, dtype=np.float64)
    if continuous is not None and np.any(continuous):
        step = np.where(continuous, _wrap(step), step)
    return bool(np.any(np.abs(step) > _JUMP_RAD + 3.0 * speed * max(dt, 0.0)))
