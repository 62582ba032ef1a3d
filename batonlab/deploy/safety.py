# SPDX-License-Identifier: BSD-3-Clause
"""The safety filter between the policy and the motors, and its state machine.

    passive ──ready──► ramp ──ramp_time_s──► run
       ▲                 │                    │
       └──── reset() ─── damp ◄── e-stop, stale or non-finite input, non-finite output

- passive: nothing is commanded; the robot's own controllers keep it where it is.
- ramp: soft start, targets blend from the pose measured on entry to the policy's targets.
- run: policy targets, rate limited and clamped.
- damp: position targets follow the measured pose, so the PD law reduces to `-kd·q̇` (or, with
  `damp_mode="hold"` or when the joint states themselves are stale or broken, the last command is
  held). Damp is latched: only `reset()` leaves it, and `reset()` refuses while the e-stop is on.

Every command that leaves this filter is finite.
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from dataclasses import dataclass

import numpy as np

from batonlab.deploy.actions import EFFORT, POSITION, VELOCITY

log = logging.getLogger("batonlab.deploy")


class State(str, enum.Enum):
    PASSIVE = "passive"
    RAMP = "ramp"
    RUN = "run"
    DAMP = "damp"


@dataclass
class SafetyCfg:
    """Limits and timings of the safety filter; joint and torque limits come from the manifest."""

    ramp_time_s: float = 2.0
    """Soft start: time to blend from the measured pose to the policy's targets [s]."""
    stale_timeout_s: float | None = None
    """Inputs older than this make the runtime damp [s]; None: two control periods."""
    max_joint_velocity: float = 3.0
    """Rate limit: position targets move at most this fast; also the clamp of velocity targets [rad/s or m/s]."""
    position_margin: float = 0.0
    """Position targets stay this far inside the manifest's joint limits [rad or m]."""
    torque_limit_scale: float = 1.0
    """PD targets are clamped so that `kp·(target − q) − kd·q̇` stays within this fraction of the torque limits."""
    damp_mode: str = "damp"
    """"damp": position targets follow the measured pose; "hold": keep the last command."""
    auto_start: bool = True
    """Leave passive as soon as every input is there; False waits for `start()`."""

    def __post_init__(self) -> None:
        if self.damp_mode not in ("damp", "hold"):
            raise ValueError(f"damp_mode must be 'damp' or 'hold', got {self.damp_mode!r}")
        if self.ramp_time_s < 0 or self.max_joint_velocity <= 0 or not 0 < self.torque_limit_scale <= 1:
            raise ValueError("need ramp_time_s >= 0, max_joint_velocity > 0 and 0 < torque_limit_scale <= 1")


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


@dataclass(frozen=True)
class Transition:
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
        self.kp, self.kd = limits.kp, limits.kd
        self.max_step = cfg.max_joint_velocity * dt
        self.on_transition = on_transition
        self.state = State.PASSIVE
        self.reason = "waiting for inputs"
        self.transitions: deque[Transition] = deque(maxlen=256)
        self.estop_input = False
        """The e-stop as last received."""
        self.estop_latched = False
        self.last_command: np.ndarray | None = None
        """The last command that left the filter (always finite)."""
        self._start_requested = False
        self._ramp_start = 0.0
        self._ramp_from: np.ndarray | None = None

    # Events.

    def set_estop(self, active: bool, now: float) -> None:
        """E-stop input; pressing it latches damp, releasing it does not clear anything."""
        self.estop_input = bool(active)
        if active and not self.estop_latched:
            self.estop_latched = True
            self._enter(State.DAMP, "e-stop", now)

    def reset(self, now: float) -> tuple[bool, str]:
        """Leave damp for passive (the only way out of damp). Refused while the e-stop is pressed."""
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
        """Damp now if commanding (ramp, run); a passive robot just stays passive."""
        if self.state in (State.RAMP, State.RUN):
            self._enter(State.DAMP, reason, now)

    # Per step.

    def update(self, now: float, ready: bool, fault: str | None, q: np.ndarray | None) -> State:
        """Advance the state machine.

        Args:
            now: Monotonic time [s].
            ready: Every input is present, fresh and finite.
            fault: Why not, if not (stale, non-finite …); damps a commanding robot.
            q: Measured positions of the policy's joints (the soft start begins there).
        """
        if self.state in (State.RAMP, State.RUN) and fault is not None:
            self._enter(State.DAMP, fault, now)
        elif self.state is State.PASSIVE:
            if ready and not self.estop_latched and (self.cfg.auto_start or self._start_requested):
                self._ramp_start = now
                self._ramp_from = np.where(self.is_pos, q, 0.0)
                self.last_command = self._ramp_from.copy()
                self._enter(State.RAMP, "inputs ready" if self.cfg.auto_start else "start requested", now)
            else:
                self.reason = fault or ("waiting for start()" if ready else "waiting for inputs")
        if self.state is State.RAMP and now - self._ramp_start >= self.cfg.ramp_time_s:
            self._enter(State.RUN, "soft start done", now)
        return self.state

    def command(self, now: float, target: np.ndarray | None, q: np.ndarray | None, qd: np.ndarray | None,
                measured_ok: bool) -> np.ndarray | None:
        """The command to send this step, or None (passive; or damp before any command was sent).

        Args:
            target: Policy targets in ramp/run (None otherwise).
            q, qd: Measured positions and velocities of the policy's joints.
            measured_ok: q and qd are fresh and finite (damp can follow them).
        """
        if self.state is State.PASSIVE:
            return None
        if self.state in (State.RAMP, State.RUN) and target is not None:
            cmd = self._filter(now, target, q, qd)
            if np.isfinite(cmd).all():
                self.last_command = cmd
                return cmd
            self._enter(State.DAMP, "non-finite command", now)
        elif self.state is not State.DAMP:
            self._enter(State.DAMP, "no policy target", now)
        cmd = self._damp_command(q, qd, measured_ok)
        if cmd is not None:
            self.last_command = cmd
        return cmd

    # Private methods.

    def _filter(self, now: float, target: np.ndarray, q: np.ndarray, qd: np.ndarray) -> np.ndarray:
        cmd = np.array(target, dtype=np.float64)
        # Soft start: blend from the pose measured when the ramp began (zero for velocity/effort joints).
        if self.state is State.RAMP and self.cfg.ramp_time_s > 0:
            alpha = min(1.0, max(0.0, (now - self._ramp_start) / self.cfg.ramp_time_s))
            cmd = self._ramp_from + alpha * (cmd - self._ramp_from)
        prev = self.last_command
        pos = self.is_pos
        # Rate limit on position targets.
        if prev is not None:
            cmd[pos] = np.clip(cmd[pos], prev[pos] - self.max_step, prev[pos] + self.max_step)
        # Torque clamp: the PD law kp·(target − q) − kd·q̇ must stay within the torque limits.
        kp, kd = self.kp[pos], self.kd[pos]
        lo = q[pos] + (-self.torque[pos] + kd * qd[pos]) / np.maximum(kp, 1e-9)
        hi = q[pos] + (self.torque[pos] + kd * qd[pos]) / np.maximum(kp, 1e-9)
        cmd[pos] = np.clip(cmd[pos], lo, hi)
        # Joint limits last: a target outside them is never sent.
        cmd[pos] = np.clip(cmd[pos], self.pos_low[pos], self.pos_high[pos])
        cmd[self.is_vel] = np.clip(cmd[self.is_vel], -self.cfg.max_joint_velocity, self.cfg.max_joint_velocity)
        cmd[self.is_eff] = np.clip(cmd[self.is_eff], -self.torque[self.is_eff], self.torque[self.is_eff])
        return cmd

    def _damp_command(self, q, qd, measured_ok: bool) -> np.ndarray | None:
        follow = self.cfg.damp_mode == "damp" and measured_ok
        if follow:
            cmd = np.where(self.is_pos, np.clip(q, self.pos_low, self.pos_high), 0.0)
            cmd[self.is_eff] = np.clip(-self.kd[self.is_eff] * qd[self.is_eff], -self.torque[self.is_eff], self.torque[self.is_eff])
        elif self.last_command is not None:
            cmd = np.where(self.is_pos, self.last_command, 0.0)
        else:
            return None
        return cmd if np.isfinite(cmd).all() else None

    def _enter(self, state: State, reason: str, now: float) -> None:
        if state is self.state:
            return
        transition = Transition(now, self.state, state, reason)
        self.state, self.reason = state, reason
        self.transitions.append(transition)
        level = logging.WARNING if state is State.DAMP else logging.INFO
        log.log(level, "%s -> %s: %s", transition.source.value, state.value, reason)
        if self.on_transition is not None:
            self.on_transition(transition)
