# SPDX-License-Identifier: BSD-3-Clause
"""Inputs other than joint states (sensor streams, task commands), and how regularly inputs arrive."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


class InputError(ValueError):
    """A malformed input message (wrong width, unknown name); the message is dropped."""


class ArrivalGaps:
    """The last `size` gaps between arrivals of each of `n` input slots (a joint, a sensor).

    The watchdog stops the robot when an input is older than the stale timeout; an input whose
    ordinary gaps come close to that timeout would stop it again and again. Knowing the gaps lets
    the runtime refuse to start with a clear message instead.
    """

    def __init__(self, n: int, size: int = 32):
        self.gaps = np.full((n, size), np.nan)
        self.last = np.full(n, np.nan)
        self._next = np.zeros(n, dtype=np.intp)

    def record(self, slots: np.ndarray | int, now: float) -> None:
        """Record an arrival at `now` [s] on `slots`, keeping the gap since each slot's previous arrival."""
        slots = np.atleast_1d(slots)
        gap = now - self.last[slots]
        seen = np.isfinite(gap)
        rows = slots[seen]
        self.gaps[rows, self._next[rows]] = gap[seen]
        self._next[rows] = (self._next[rows] + 1) % self.gaps.shape[1]
        self.last[slots] = now

    def typical_max(self, min_samples: int = 8) -> tuple[float, int] | None:
        """The largest per-slot 90th-percentile gap [s] and its slot, once every slot has `min_samples` gaps."""
        counts = np.isfinite(self.gaps).sum(axis=1)
        if len(counts) == 0 or counts.min() < min_samples:
            return None
        p90 = np.nanpercentile(self.gaps, 90, axis=1)
        k = int(np.argmax(p90))
        return float(p90[k]), k


@dataclass
class VectorInput:
    """A sensor stream or a command received from outside, by the name the manifest uses."""

    name: str
    dim: int
    kind: str
    """"sensor": a stream that must stay fresh; "command": a setpoint that holds until replaced."""
    default: np.ndarray | None = None
    """Commands: value before the first message and after `timeout_s` (e.g. zero velocity)."""
    timeout_s: float | None = None
    """Commands: fall back to `default` when no message came for this long [s]."""
    value: np.ndarray | None = None
    stamp: float | None = None
    """Arrival time of the last message (monotonic) [s]."""
    gaps: ArrivalGaps = field(default_factory=lambda: ArrivalGaps(1))
    pose: bool = False
    """A pose sensor (`batonlab.deploy.pose`): position then quaternion (w, x, y, z); one whose quaternion
    is off unit length is as bad as a non-finite reading."""

    @property
    def required(self) -> bool:
        """The robot cannot start before this input has arrived once."""
        return self.default is None
