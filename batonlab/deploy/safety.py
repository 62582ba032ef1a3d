# SPDX-License-Identifier: BSD-3-Clause
"""The safety filter between the policy and the motors, and its state machine.

Design and contract notes: docs/modules/batonlab.deploy.safety.md.
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from batonlab.deploy.actions import EFFORT, POSITION, VELOCITY
from batonlab.deploy.joints import PlausibilityCfg

log = logging.getLogger("batonlab.deploy")

STOP_BEHAVIORS = ("hold_then_damp", "hold", "damp", "crouch")
"""What a stopped robot does; see the module docstring."""

DEFAULT_ESTOP_HEARTBEAT_TIMEOUT_S = 0.2
"""The heartbeat timeout a node uses when its e-stop is a heartbeat and none is set [s]."""


class State(str, enum.Enum):
    """The safety filter's states: passive, ramping up to the policy, running it, or stopped."""

    PASSIVE = "passive"
    RAMP = "ramp"
    RUN = "run"
    STOP = "stop"


@dataclass
class SafetyCfg:
    """Limits and timings of the safety filter; joint and torque limits come from the manifest."""

    ramp_time_s: float = 2.0
    """Soft start: time to blend from the measured pose to the policy's targets [s]."""
    stale_timeout_s: float | None = None
    """Inputs older than this stop the robot [s]; None: `default_stale_timeout(dt)`."""
    max_joint_velocity: float = 3.0
    """Rate limit: position targets move at most this fast [rad/s or m/s]."""
    max_velocity_command: float | None = None
    """Velocity targets (wheels) stay within ± this, and within the manifest's control range [rad/s]; None: the
    control range alone."""
    max_acceleration: float = 400.0
    """Velocity targets change at most this fast while running [rad/s²] (the policy's own wheel commands
    in training change by up to ~8 rad/s per 20 ms step)."""
    stop_deceleration: float = 20.0
    """Stopped: velocity targets ramp to zero at this rate [rad/s²] (a 0.1 m wheel: 2 m/s², 1.5 s from 3 m/s)."""
    position_margin: float = 0.0
    """Position targets stay this far inside the manifest's joint limits [rad or m]."""
    torque_limit_scale: float = 1.0
    """PD targets are clamped so that `kp·(target − q) − kd·q̇` stays within this fraction of the torque limits."""
    stop_behavior: str | None = None
    """One of `STOP_BEHAVIORS` (see the module docstring); None: the robot's, from the manifest
    (`DeployRuntime`), "hold_then_damp" for a bare `SafetyFilter`."""
    stop_pose: dict[str, float] | None = None
    """"crouch": targets of the joints that move to a resting pose [rad or m]; None: the manifest's."""
    stop_time_s: float | None = None
    """"crouch": time to reach `stop_pose` [s]; None: the manifest's (1 s for a bare `SafetyFilter`)."""
    stop_hold_time_s: float = 3.0
    """"hold_then_damp": how long the pose is held before damping [s]."""
    stop_hold_torque_scale: float = 0.5
    """Holding a stopped pose uses at most this fraction of the torque limits (limited gains)."""
    auto_start: bool = True
    """Leave passive as soon as every input is there; False waits for `start()`."""
    estop_heartbeat_timeout_s: float | None = None
    """None: the e-stop is a latch (true stops). A number: heartbeat mode, the robot stops unless
    `estop=false` arrives at least this often [s] (the usual wiring of wireless e-stops)."""
    plausibility: PlausibilityCfg = field(default_factory=PlausibilityCfg)
    """Joint readings outside these bounds are sensor faults."""
    velocity_from_positions: bool = False
    """Estimate joint velocities by finite differences when joint states carry positions only."""
    input_rate_samples: int = 8
    """Arrival gaps measured per input before the robot may start: an input whose ordinary gaps would
    trip the stale timeout is refused with a message instead (0: start at once, unchecked)."""

    def __post_init__(self) -> None:
        if self.stop_behavior is not None and self.stop_behavior not in STOP_BEHAVIORS:
            raise ValueError(f"stop_behavior must be one of {list(STOP_BEHAVIORS)}, got {self.stop_behavior!r}")
        if self.ramp_time_s < 0 or self.max_joint_velocity <= 0 or not 0 < self.torque_limit_scale <= 1:
            raise ValueError("need ramp_time_s >= 0, max_joint_velocity > 0 and 0 < torque_limit_scale <= 1")
        if self.stop_hold_time_s < 0 or not 0 < self.stop_hold_torque_scale <= 1:
            raise ValueError("need stop_hold_time_s >= 0 and 0 < stop_hold_torque_scale <= 1")
        if self.max_acceleration <= 0 or self.stop_deceleration <= 0:
            raise ValueError("need max_acceleration > 0 and stop_deceleration > 0")
        if self.max_velocity_command is not None and self.max_velocity_command <= 0:
            raise ValueError(f"max_velocity_command must be > 0 (or None), got {self.max_velocity_command}")
        if self.stop_time_s is not None and self.stop_time_s < 0:
            raise ValueError(f"stop_time_s must be >= 0, got {self.stop_time_s}")
        if self.stale_timeout_s is not None and self.stale_timeout_s <= 0:
            raise ValueError(f"stale_timeout_s must be > 0 (or None for the default), got {self.stale_timeout_s}")
        if self.estop_heartbeat_timeout_s is not None and self.estop_heartbeat_timeout_s <= 0:
            raise ValueError(f"estop_heartbeat_timeout_s must be > 0 (or None: latching e-stop), got {self.estop_heartbeat_timeout_s}")


def default_stale_timeout(dt: float) -> float:
    """Two control periods, but at least 25 ms: below that, ordinary DDS jitter on a loaded robot
    computer would stop the robot (at 50 Hz this is 40 ms; at 200 Hz, 25 ms = 5 periods)."""
    return max(2.0 * dt, 0.025)


@dataclass
class JointLimits:
    """Per-joint arrays in policy order."""

    kinds: tuple[str, ...]
    """POSITION, VELOCITY or EFFORT per joint."""
    pos_low: np.ndarray
    pos_high: np.ndarray
    torque: np.ndarray
    """Actuator force limits (inf where unlimited) [N·m or N]."""
    kp: np.ndarray
    kd: np.ndarray
    vel_low: np.ndarray | None = None
    """Velocity joints: the speed range of their actuators (the manifest's control range) [rad/s]; None: unlimited."""
    vel_high: np.ndarray | None = None
    names: tuple[str, ...] = ()
    """Joint names, to place `SafetyCfg.stop_pose`; empty: a crouch moves no joint."""
    max_rate: np.ndarray | None = None
    """Position joints: the target rate limit the policy was trained under (manifest `max_target_rate`), inf
    where none [rad/s or m/s]; the filter applies the lower of it and `SafetyCfg.max_joint_velocity`."""


@dataclass(frozen=True)
class Transition:
    """A change of the safety filter's state at `time` [s], from `source` to `target`, and why."""

    time: float
    source: State
    target: State
    reason: str


class SafetyFilter:
    """State machine and per-step command filter.

    Args:
        cfg: Limits and timings.
        limits: Joint limits and PD gains from the manifest.
        dt: Control period [s].
        on_transition: Called with every `Transition` (the ROS node logs and publishes them).
    """

    def __init__(self, cfg: SafetyCfg, limits: JointLimits, dt: float, on_transition=None):
        self.cfg = cfg
        self.dt = dt
        self.kinds = np.array(limits.kinds)
        self.is_pos = self.kinds == POSITION
        self.is_vel = self.kinds == VELOCITY
        self.is_eff = self.kinds == EFFORT
        self.pos_low = limits.pos_low + cfg.position_margin
        self.pos_high = limits.pos_high - cfg.position_margin
        self.torque = limits.torque * cfg.torque_limit_scale
        self.hold_torque = limits.torque * cfg.stop_hold_torque_scale
        self.kp, self.kd = limits.kp, limits.kd
        n = len(limits.kinds)
        trained_rate = limits.max_rate if limits.max_rate is not None else np.full(n, np.inf)
        self.max_step = np.minimum(cfg.max_joint_velocity, trained_rate) * dt
        """(n,) per-step move of position targets: the robot's rate limit, or the one trained under where lower."""
        speed = cfg.max_velocity_command if cfg.max_velocity_command is not None else np.inf
        vel_low = limits.vel_low if limits.vel_low is not None else np.full(n, -np.inf)
        vel_high = limits.vel_high if limits.vel_high is not None else np.full(n, np.inf)
        self.vel_low, self.vel_high = np.maximum(vel_low, -speed), np.minimum(vel_high, speed)
        if np.any(self.vel_low[self.is_vel] > 0) or np.any(self.vel_high[self.is_vel] < 0):
            raise ValueError("a velocity joint's speed range must contain zero (its stop command)")
        self.max_speed_step = cfg.max_acceleration * dt
        self.stop_speed_step = cfg.stop_deceleration * dt
        self.behavior = cfg.stop_behavior or "hold_then_damp"
        self.stop_time_s = cfg.stop_time_s if cfg.stop_time_s is not None else 1.0
        pose = cfg.stop_pose or {}
        unknown = sorted(set(pose) - set(limits.names))
        if unknown:
            raise ValueError(f"stop_pose names joints {unknown} that this filter does not command {list(limits.names)}")
        self.stop_pose = np.array([pose.get(name, np.nan) for name in limits.names] if limits.names else [np.nan] * n)
        if np.any(np.isfinite(self.stop_pose) & ~self.is_pos):
            raise ValueError("stop_pose may only name position-controlled joints")
        self.on_transition = on_transition
        self.state = State.PASSIVE
        self.reason = "waiting for inputs"
        self.transitions: deque[Transition] = deque(maxlen=256)
        self.estop_input = False
        """The e-stop as last received (in heartbeat mode: true while the heartbeat is missing)."""
        self.estop_latched = False
        self.last_command: np.ndarray | None = None
        """The last command that left the filter (always finite, always within the limits)."""
        self.has_commanded = False
        """A command has ever left the filter: from then on, nothing may end the node without a stop."""
        self._start_requested = False
        self._ramp_start = 0.0
        self._ramp_from: np.ndarray | None = None
        self._stop_start = 0.0
        self._stop_from: np.ndarray | None = None
        """The last command before the stop: held, or the start of the crouch."""
        self._crouched = False
        """"crouch": the crouch pose has been commanded."""

    # Events.

    def set_estop(self, active: bool, now: float, reason: str = "e-stop") -> None:
        """E-stop input; pressing it latches stop, releasing it does not clear anything."""
        self.estop_input = bool(active)
        if active and not self.estop_latched:
            self.estop_latched = True
            self._enter(State.STOP, reason, now)

    def reset(self, now: float) -> tuple[bool, str]:
        """Leave stop for passive (the only way out of stop). Refused while the e-stop is pressed."""
        if self.estop_input:
            return False, "e-stop is still active; release it first"
        if self.state is State.PASSIVE:
            return True, "already passive"
        self.estop_latched = False
        self._start_requested = False
        self._enter(State.PASSIVE, "reset", now)
        return True, "reset to passive"

    def start(self) -> None:
        """Allow passive → ramp when `auto_start` is off."""
        self._start_requested = True

    def fault(self, reason: str, now: float) -> None:
        """Stop now if commanding (ramp, run); a passive robot just stays passive."""
        if self.state in (State.RAMP, State.RUN):
            self._enter(State.STOP, reason, now)

    # Per step.

    def update(self, now: float, ready: bool, fault: str | None, q: np.ndarray | None, waiting: str | None = None) -> State:
        """Advance the state machine.

        Args:
            now: Monotonic time [s].
            ready: Every input is present, fresh, finite and plausible.
            fault: Why not (stale, non-finite …), if that should stop a commanding robot.
            q: Measured positions of the policy's joints (the soft start begins there).
            waiting: Why a passive robot does not start yet (shown as the reason).
        """
        if self.state in (State.RAMP, State.RUN) and fault is not None:
            self._enter(State.STOP, fault, now)
        elif self.state is State.PASSIVE:
            if ready and not self.estop_latched and (self.cfg.auto_start or self._start_requested):
                self._ramp_start = now
                self._ramp_from = np.where(self.is_pos, np.clip(q, self.pos_low, self.pos_high), 0.0)
                self.last_command = self._ramp_from.copy()  # the rate limit's reference for the first step
                self._enter(State.RAMP, "inputs ready" if self.cfg.auto_start else "start requested", now)
            else:
                self.reason = fault or waiting or ("waiting for start()" if ready else "waiting for inputs")
        if self.state is State.RAMP and now - self._ramp_start >= self.cfg.ramp_time_s:
            self._enter(State.RUN, "soft start done", now)
        return self.state

    def command(self, now: float, target: np.ndarray | None, q: np.ndarray | None, qd: np.ndarray | None,
                measured_ok: bool) -> np.ndarray | None:
        """The command to send this step, or None (passive; or stopped before any command was sent).

        Args:
            target: Policy targets in ramp/run (None otherwise).
            q, qd: Measured positions and velocities of the policy's joints.
            measured_ok: q and qd are fresh, finite and plausible (limits and stops may use them).
        """
        if self.state is State.PASSIVE:
            return None
        if self.state in (State.RAMP, State.RUN) and target is not None:
            cmd = np.array(target, dtype=np.float64)
            if self.state is State.RAMP and self.cfg.ramp_time_s > 0:
                # Soft start: blend from the pose measured when the ramp began (zero for velocity/effort joints).
                alpha = min(1.0, max(0.0, (now - self._ramp_start) / self.cfg.ramp_time_s))
                cmd = self._ramp_from + alpha * (cmd - self._ramp_from)
            cmd = self._limit(cmd, q, qd, measured_ok, self.torque)
            if np.isfinite(cmd).all():
                return self._sent(cmd)
            self._enter(State.STOP, "non-finite command", now)
        elif self.state is not State.STOP:
            self._enter(State.STOP, "no policy target", now)
        cmd = self._stop_command(now, q, qd, measured_ok)
        return None if cmd is None else self._sent(cmd)

    def stopped_for(self, now: float) -> float | None:
        """Time since the stop began on the control clock [s] (None while not stopped)."""
        return now - self._stop_start if self.state is State.STOP else None

    def stop_phase(self, now: float) -> str | None:
        """"hold", "crouch" or "damp" while stopped (None otherwise)."""
        if self.state is not State.STOP:
            return None
        elapsed = now - self._stop_start
        if self.behavior == "hold_then_damp":
            return "hold" if elapsed < self.cfg.stop_hold_time_s else "damp"
        if self.behavior == "crouch":
            wheels_turning = self.last_command is not None and np.any(self.last_command[self.is_vel] != 0.0)
            return "crouch" if not self._crouched or wheels_turning else "damp"
        return self.behavior

    def restart_from(self, q: np.ndarray, qd: np.ndarray) -> None:
        """A new episode under a running policy (the world was reset): the rate windows start from the measured
        state, as training's command filter does after a reset (position targets: the measured positions within the
        limits; velocity targets: the measured speeds within their range). Ignored outside ramp and run, or
        with a non-finite measurement."""
        if self.state not in (State.RAMP, State.RUN) or self.last_command is None:
            return
        if not (np.isfinite(q).all() and np.isfinite(qd).all()):
            return
        cmd = self.last_command.copy()
        pos, vel = self.is_pos, self.is_vel
        cmd[pos] = np.clip(q[pos], self.pos_low[pos], self.pos_high[pos])
        cmd[vel] = np.clip(qd[vel], self.vel_low[vel], self.vel_high[vel])
        self.last_command = cmd

    # Private methods.

    def _limit(self, cmd: np.ndarray, q, qd, measured_ok: bool, torque: np.ndarray) -> np.ndarray:
        """Torque clamp where the measurements allow it, then the rate limit and the joint limits, last."""
        pos = self.is_pos
        if measured_ok:
            # PD torque kp·(target − q) − kd·q̇ within ±torque.
            kp, kd = np.maximum(self.kp[pos], 1e-9), self.kd[pos]
            low = q[pos] + (-torque[pos] + kd * qd[pos]) / kp
            high = q[pos] + (torque[pos] + kd * qd[pos]) / kp
            cmd[pos] = np.clip(cmd[pos], low, high)
        # The last stage: a window around the previous command (always inside the limits, so the
        # window is never empty) intersected with the limits: the rate limit and the joint limits of
        # position targets, the acceleration limit and the speed range of velocity targets.
        cmd[pos] = self._within_step(cmd, pos, self.pos_low[pos], self.pos_high[pos], self.max_step[pos])
        vel = self.is_vel
        cmd[vel] = self._within_step(cmd, vel, self.vel_low[vel], self.vel_high[vel], self.max_speed_step)
        cmd[self.is_eff] = np.clip(cmd[self.is_eff], -torque[self.is_eff], torque[self.is_eff])
        return cmd

    def _within_step(self, cmd: np.ndarray, joints: np.ndarray, low: np.ndarray, high: np.ndarray,
                     step: float | np.ndarray) -> np.ndarray:
        """`cmd[joints]` inside [low, high] and at most `step` from the previous command."""
        prev = self.last_command
        if prev is not None:
            low = np.maximum(low, prev[joints] - step)
            high = np.minimum(high, prev[joints] + step)
        return np.minimum(np.maximum(cmd[joints], low), high)

    def _stop_command(self, now: float, q, qd, measured_ok: bool) -> np.ndarray | None:
        if self.last_command is None:
            return None  # stopped before anything was commanded: keep sending nothing
        if self._stop_from is None:
            # The last command, not the measured pose: a PD servo holds a loaded joint with its target
            # offset from the measured pose by load/kp; a target at the measured pose would let it sag.
            self._stop_from = self.last_command.copy()
        phase = self.stop_phase(now)
        torque = self.torque
        if phase == "hold":
            cmd, torque = np.where(self.is_pos, self._stop_from, 0.0), self.hold_torque
        elif phase == "crouch":
            alpha = min(1.0, (now - self._stop_start) / self.stop_time_s) if self.stop_time_s > 0 else 1.0
            moving = np.isfinite(self.stop_pose)
            cmd = np.where(self.is_pos, self._stop_from, 0.0)
            cmd[moving] = self._stop_from[moving] + alpha * (self.stop_pose[moving] - self._stop_from[moving])
            self._crouched = alpha >= 1.0  # the pose is commanded: damping may begin next period
        elif measured_ok:
            cmd = np.where(self.is_pos, q, 0.0)
            cmd[self.is_eff] = -self.kd[self.is_eff] * qd[self.is_eff]
        else:
            cmd = np.where(self.is_pos, self.last_command, 0.0)
        # Wheels brake at the deceleration limit in every phase: a speed command never jumps to zero.
        prev = self.last_command[self.is_vel]
        cmd[self.is_vel] = np.sign(prev) * np.maximum(np.abs(prev) - self.stop_speed_step, 0.0)
        cmd = self._limit(cmd, q, qd, measured_ok, torque)
        return cmd if np.isfinite(cmd).all() else None

    def _sent(self, cmd: np.ndarray) -> np.ndarray:
        self.last_command = cmd
        self.has_commanded = True
        return cmd

    def _enter(self, state: State, reason: str, now: float) -> None:
        if state is self.state:
            return
        transition = Transition(now, self.state, state, reason)
        self.state, self.reason = state, reason
        if state is State.STOP:
            self._stop_start, self._stop_from, self._crouched = now, None, False
        self.transitions.append(transition)
        level = logging.WARNING if state is State.STOP else logging.INFO
        log.log(level, "%s -> %s: %s", transition.source.value, state.value, reason)
        if self.on_transition is not None:
            self.on_transition(transition)
