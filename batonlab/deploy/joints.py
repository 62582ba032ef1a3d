# SPDX-License-Identifier: BSD-3-Clause
"""Joint states by name: messages in the robot's order, merged into the policy's order.

Robots publish their joints in whatever grouping suits their drivers: all in one `JointState`, the
arm and the gripper (or legs and wheels) in separate messages, at different rates. `JointStates`
merges them by name; each joint keeps its own arrival time, so a joint that stops arriving goes
stale on its own, whichever message used to carry it.

It also judges whether a reading is physically plausible. A reading far outside the joint's range,
or one that implies a speed the joint cannot reach, is a sensor fault, not a pose: the safety filter
must never compute targets or torque clamps around it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


class JointMismatchError(ValueError):
    """The robot's joints are not the joints the manifest was trained with."""


class JointInputError(ValueError):
    """A malformed joint-state message (duplicate names, widths that do not match); it is dropped."""


@dataclass
class PlausibilityCfg:
    """What a joint sensor can report; readings beyond it are sensor faults."""

    range_tolerance: float = 0.1
    """Readings more than this outside a joint's position limits are faults [rad or m]."""
    max_speed: float = 50.0
    """Fastest a limited joint can move: larger velocity readings, or position jumps implying more, are faults [rad/s or m/s]."""
    jump_tolerance: float = 0.05
    """Position change allowed on top of `max_speed · Δt` (sensor noise, quantisation) [rad or m]."""


class JointStates:
    """The latest position and velocity of every joint the policy needs, merged across messages.

    Args:
        needed: Joint names the policy reads or commands, in policy order.
        ignored: Robot joints the policy does not use (a gripper, a head) that may appear in messages.
        limits: (len(needed), 2) position limits used by the plausibility check (±inf: unchecked).
        plausibility: Sensor limits; None disables the check.
        velocity_from_positions: Estimate velocities by finite differences of positions when the
            robot sends positions only (off by default: a missing velocity is reported instead).
    """

    def __init__(self, needed: Sequence[str], ignored: Sequence[str] = (), limits: np.ndarray | None = None,
                 plausibility: PlausibilityCfg | None = None, velocity_from_positions: bool = False):
        self.needed = tuple(needed)
        self.ignored = frozenset(ignored)
        self._slot = {name: i for i, name in enumerate(self.needed)}
        n = len(self.needed)
        limits = np.full((n, 2), [-np.inf, np.inf]) if limits is None else np.asarray(limits, dtype=np.float64)
        self.low, self.high = limits[:, 0], limits[:, 1]
        self.limited = np.isfinite(self.low) & np.isfinite(self.high)
        self.plausibility = plausibility
        self.velocity_from_positions = velocity_from_positions
        self.position = np.zeros(n)
        self.velocity = np.zeros(n)
        self.stamp = np.full(n, -np.inf)
        """Arrival time of each joint's last reading [s] (-inf: never)."""
        self.has_velocity = np.zeros(n, dtype=bool)
        self.fault = np.zeros(n, dtype=bool)
        """The joint's last reading was implausible (see `fault_text`)."""
        self.fault_text: dict[int, str] = {}
        self._good_position = np.full(n, np.nan)
        self._good_time = np.full(n, np.nan)
        """Last plausible position and its source time: the reference of the jump check."""
        self._index: dict[tuple[str, ...], tuple[np.ndarray, np.ndarray]] = {}

    # Messages.

    def update(self, names: Sequence[str], position: Sequence[float], velocity: Sequence[float], now: float,
               source_time: float | None = None) -> np.ndarray:
        """Merge one message; returns the policy-order slots it updated.

        Args:
            names, position, velocity: The message (velocity may be empty).
            now: Arrival time on the control clock [s].
            source_time: When the robot took the reading (header stamp, else DDS source stamp) [s];
                the jump check measures Δt on it, because messages can arrive bunched up. Default `now`.

        Raises:
            JointMismatchError: the message names joints that are neither needed nor ignored.
            JointInputError: duplicate names, or widths that do not match the names.
        """
        slots, cols = self._columns(tuple(names))
        position = np.asarray(position, dtype=np.float64).reshape(-1)
        velocity = np.asarray(velocity, dtype=np.float64).reshape(-1)
        if position.size != len(names):
            raise JointInputError(f"joint_states has {len(names)} names but {position.size} positions")
        if velocity.size not in (0, len(names)):
            raise JointInputError(f"joint_states has {len(names)} names but {velocity.size} velocities")
        t = now if source_time is None else source_time
        q = position[cols]
        if velocity.size:
            qd, known = velocity[cols], np.ones(len(slots), dtype=bool)
        elif self.velocity_from_positions:
            dt = t - self._good_time[slots]
            qd = (q - self._good_position[slots]) / np.where(dt > 0, dt, np.nan)
            known = np.isfinite(qd)
            qd = np.where(known, qd, 0.0)
        else:
            qd, known = np.zeros(len(slots)), np.zeros(len(slots), dtype=bool)
        self.position[slots], self.velocity[slots] = q, qd
        self.has_velocity[slots] = known
        self.stamp[slots] = now
        self._judge(slots, q, qd, t)
        return slots

    def check(self, names: Sequence[str], missing_too: bool = True) -> None:
        """Raise `JointMismatchError` naming unexpected joints (and, optionally, needed joints that
        neither this message nor an earlier one carried)."""
        names = list(names)
        extra = [n for n in names if n not in self._slot and n not in self.ignored]
        missing = [n for n in self.never_received() if n not in names] if missing_too else []
        if extra or missing:
            parts = []
            if missing:
                parts.append(f"missing joints {missing}")
            if extra:
                parts.append(f"unexpected joints {extra} (list joints the policy does not use in ignored_joints)")
            raise JointMismatchError(
                "the robot's joint states do not match the policy manifest: " + "; ".join(parts)
                + f". The policy expects {list(self.needed)}; the robot sends {names}."
            )

    # Queries.

    def never_received(self) -> list[str]:
        """The needed joints that no message has carried yet."""
        return [n for n, s in zip(self.needed, self.stamp) if s == -np.inf]

    def oldest(self, now: float) -> tuple[float, str]:
        """Age of the stalest joint [s] and its name."""
        k = int(np.argmin(self.stamp))
        return now - float(self.stamp[k]), self.needed[k]

    def faults(self) -> list[str]:
        """What is wrong with each joint whose last reading was implausible, one text per faulty joint."""
        return [self.fault_text[k] for k in np.flatnonzero(self.fault)]

    def non_finite(self, need_velocity: bool) -> list[str]:
        """The needed joints whose position (or, with `need_velocity`, velocity) is not finite."""
        bad = ~np.isfinite(self.position)
        if need_velocity:
            bad |= ~np.isfinite(self.velocity)
        return [n for n, b in zip(self.needed, bad) if b]

    def without_velocity(self) -> list[str]:
        """The needed joints whose velocity is not known (neither received nor estimated)."""
        return [n for n, known in zip(self.needed, self.has_velocity) if not known]

    # Private methods.

    def _columns(self, names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        cached = self._index.get(names)
        if cached is not None:
            return cached
        if len(set(names)) != len(names):
            raise JointInputError(f"joint_states names joints twice: {sorted({n for n in names if names.count(n) > 1})}")
        self.check(names, missing_too=False)
        cols = [i for i, n in enumerate(names) if n in self._slot]
        slots = np.array([self._slot[names[i]] for i in cols], dtype=np.intp)
        self._index[names] = cached = (slots, np.array(cols, dtype=np.intp))
        return cached

    def _judge(self, slots: np.ndarray, q: np.ndarray, qd: np.ndarray, t: float) -> None:
        """Mark implausible readings; remember plausible ones as the next jump reference."""
        cfg = self.plausibility
        bad = np.zeros(len(slots), dtype=bool)
        if cfg is not None:
            limited = self.limited[slots]
            low, high = self.low[slots], self.high[slots]
            out_of_range = limited & ((q < low - cfg.range_tolerance) | (q > high + cfg.range_tolerance))
            too_fast = limited & (np.abs(qd) > cfg.max_speed)
            dt = t - self._good_time[slots]
            jump = np.abs(q - self._good_position[slots])
            # A reading no later than the reference (a restarted clock, a repeated stamp) is not judged by speed.
            jumped = limited & np.isfinite(jump) & (dt > 0) & (jump > cfg.max_speed * np.maximum(dt, 0.0) + cfg.jump_tolerance)
            bad = (out_of_range | too_fast | jumped) & np.isfinite(q) & np.isfinite(qd)
            for k in np.flatnonzero(bad):
                slot, name = int(slots[k]), self.needed[slots[k]]
                if out_of_range[k]:
                    text = f"{name} reads {q[k]:.4g} (limits [{low[k]:.3g}, {high[k]:.3g}])"
                elif too_fast[k]:
                    text = f"{name} reads {qd[k]:.4g}/s (sensor limit {cfg.max_speed:g}/s)"
                else:
                    text = f"{name} jumped {jump[k]:.3g} in {dt[k] * 1e3:.0f} ms"
                self.fault_text[slot] = text
        self.fault[slots] = bad
        good = ~bad & np.isfinite(q)
        self._good_position[slots[good]] = q[good]
        self._good_time[slots[good]] = t
