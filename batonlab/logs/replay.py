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
from batonlab.logs.bag_reader import BagError, BagLog

PHYSICS_MODES = ("logged", "nominal", "randomized")
"""Model parameters of the replay: those stored in the bag, the task's nominal model, or a fresh
draw of the task's startup randomisation (a different robot; shows the sim-vs-log gap)."""

_JUMP_RAD = 0.1
"""A logged joint moving more than this [rad or m] plus 3·|qd|·Δt between two samples is a reset."""


# The replay simulator.


def task_of(log: BagLog, task: str | None = None) -> str:
    task = task or log.metadata.get("task")
    if not task:
        raise BagError(f"{log.path}: the bag does not say which task it comes from; pass --task NAME")
    return task


def make_replay_env(log: BagLog, task: str | None = None, physics: str = "logged", seed: int = 0) -> BatonEnv:
    """One world of the bag's task (play configuration) with the requested physics parameters.

    Startup randomisation runs only for `physics="randomized"`; with "logged" the parameters stored
    in the bag are written into the nominal model.
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
    if physics == "logged" and log.metadata.get("physics"):
        ids = torch.zeros(1, dtype=torch.long)
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
    """The simulated vs. the logged trajectory of the commanded joints, at the logged sample times."""

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
    """(M, J) targets in `joint_names` order."""
    physics: str
    initial_state: str
    """"metadata" (the bag's full sim state) or "joint_states" (the first logged sample)."""
    segments: list[tuple[int, int]] = field(default_factory=list)
    """[start, end) sample ranges replayed from a logged state (more than one after resets in the log)."""
    notes: list[str] = field(default_factory=list)

    @property
    def error(self) -> np.ndarray:
        """(N, J) simulated minus logged position."""
        return self.sim_pos - self.logged_pos

    @property
    def rmse_per_joint(self) -> np.ndarray:
        return np.sqrt(np.nanmean(self.error**2, axis=0))

    @property
    def rmse(self) -> float:
        """Over all joints and samples [rad or m]."""
        return float(np.sqrt(np.nanmean(self.error**2)))

    @property
    def rmse_over_time(self) -> np.ndarray:
        """(N,) RMS over joints at each sample."""
        return np.sqrt(np.nanmean(self.error**2, axis=1))

    @property
    def max_abs_error(self) -> float:
        return float(np.nanmax(np.abs(self.error))) if self.error.size else 0.0


def replay_open_loop(log: BagLog, env: BatonEnv | None = None, task: str | None = None, physics: str = "logged",
                     seed: int = 0) -> OpenLoopResult:
    """Drive the simulator with the logged joint commands from the logged initial state.

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
    dt = float(model.opt.timestep)
    notes = []

    # Sample times: header stamps when they are usable (the state's own time), else log times.
    t = js.stamp if np.all(np.isfinite(js.stamp)) and np.all(np.diff(js.stamp) >= 0) and js.stamp[-1] > js.stamp[0] else js.t
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
    ids = torch.zeros(1, dtype=torch.long)
    qadr, dadr = env.scene.qpos_adr(names).numpy(), env.scene.dof_adr(names).numpy()
    segments: list[tuple[int, int]] = []
    if physics == "logged" and not log.metadata.get("physics") and log.metadata.get("source") != "sim":
        notes.append("the bag holds no physics parameters: replayed on the nominal model")
        physics = "nominal"

    def start_at(k: int, from_metadata: bool) -> None:
        if from_metadata:
            state = log.metadata["initial_state"]
            qpos, qvel = torch.as_tensor(state["qpos"], dtype=torch.float64), torch.as_tensor(state["qvel"], dtype=torch.float64)
        else:
            quat = _imu_at(log, t[k])
            qpos, qvel = logged_qpos(env, js.names, pos[k], quat), logged_qvel(env, js.names, vel[k])
        env.sim.reset(ids, qpos[None], qvel[None])
        segments.append((k, len(t)))

    start_at(first, has_initial)
    sim_pos[first], sim_vel[first] = env.sim.qpos[0, qadr].double().numpy(), env.sim.qvel[0, dadr].double().numpy()
    clock = t[first]
    for k in range(first + 1, len(t)):
        if _is_jump(pos[k - 1, cols], pos[k, cols], vel[k - 1, cols], vel[k, cols], t[k] - t[k - 1]):
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
        sim_pos[k] = env.sim.qpos[0, qadr].double().numpy()
        sim_vel[k] = env.sim.qvel[0, dadr].double().numpy()
    if len(segments) > 1:
        notes.append(f"{len(segments) - 1} jumps in the logged joint states (resets): replay restarted from the log there")
    keep = slice(first, len(t))
    return OpenLoopResult(
        joint_names=list(names), t=t[keep], logged_pos=pos[keep][:, cols], sim_pos=sim_pos[keep],
        logged_vel=vel[keep][:, cols], sim_vel=sim_vel[keep], command_t=cmd_t, commands=commands, physics=physics,
        initial_state="metadata" if has_initial else "joint_states",
        segments=[(a - first, b - first) for a, b in segments], notes=notes,
    )


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


def _is_jump(q0, q1, qd0, qd1, dt) -> bool:
    speed = np.nan_to_num(np.maximum(np.abs(qd0), np.abs(qd1)), nan=0.0)
    return bool(np.any(np.abs(q1 - q0) > _JUMP_RAD + 3.0 * speed * max(dt, 0.0)))


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
    """(N, A) post-processed targets minus logged filtered targets, where the step ran unfiltered (run/sim); NaN elsewhere."""
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
    if steps.action_filtered.shape[1] == manifest.action_dim:
        process = ActionProcessor(manifest)
        unfiltered = np.array([s in ("run", "sim") for s in np.array(steps.safety_state)[ran]])
        targets = np.array([process(a) for a in replayed])
        if log.metadata.get("source") == "sim":
            # Simulation logs the targets after the actuators' control range, where MuJoCo applies them.
            ctrl = manifest.ctrl_range
            targets = np.clip(targets, ctrl[:, 0], ctrl[:, 1])
        target_diff = np.where(unfiltered[:, None], targets - steps.action_filtered[ran], np.nan)
    return PolicyEvalResult(steps.t[ran], steps.action_raw[ran].astype(np.float64), replayed.astype(np.float64),
                            list(manifest.joint_names), target_diff, Path(export_dir), notes)
