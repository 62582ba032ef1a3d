# SPDX-License-Identifier: BSD-3-Clause
"""How punctual the control loop itself is: the node's own delays, kept apart from the robot's."""

from __future__ import annotations

import gc
import os
from collections import deque

import numpy as np


class LoopTiming:
    """Gaps between control ticks and the compute time of each step.

    A tick that comes more than half a period late, or a step that computes for longer than a
    period, is an overrun: the node (not the robot) was late. The watchdog's stop latency is judged
    beyond this delay.

    Args:
        period_s: The control period [s].
        window: Ticks kept for the percentiles.
    """

    def __init__(self, period_s: float, window: int = 3000):
        self.period_s = period_s
        self.gaps = deque(maxlen=window)
        self.compute = deque(maxlen=window)
        self.overruns = 0
        self.ticks = 0
        self.late_s = 0.0
        """How late the current tick came (gap beyond one period) [s]."""
        self.worst_late_s = 0.0
        self._last: float | None = None

    def tick(self, now: float) -> float:
        """Record the start of a control step; returns how late it is [s]."""
        self.ticks += 1
        self.late_s = 0.0
        if self._last is not None:
            gap = now - self._last
            self.gaps.append(gap)
            self.late_s = max(0.0, gap - self.period_s)
            self.worst_late_s = max(self.worst_late_s, self.late_s)
            if gap > 1.5 * self.period_s:
                self.overruns += 1
        self._last = now
        return self.late_s

    def done(self, compute_s: float) -> None:
        """Record the compute time of the step [s]."""
        self.compute.append(compute_s)
        if compute_s > self.period_s:
            self.overruns += 1

    def stats(self) -> dict[str, float | int]:
        """Tick and overrun counts, tick-gap percentiles [ms] and step compute-time percentiles [µs] of the window."""
        gaps = np.array(self.gaps) if self.gaps else np.zeros(1)
        compute = np.array(self.compute) if self.compute else np.zeros(1)
        return {
            "ticks": self.ticks,
            "loop_overruns": self.overruns,
            "tick_gap_p50_ms": float(np.percentile(gaps, 50) * 1e3),
            "tick_gap_p99_ms": float(np.percentile(gaps, 99) * 1e3),
            "tick_gap_max_ms": float(gaps.max() * 1e3),
            "step_time_p50_us": float(np.percentile(compute, 50) * 1e6),
            "step_time_max_us": float(compute.max() * 1e6),
        }


def use_realtime_priority(priority: int) -> str | None:
    """Run every thread of this process (the control loop and the middleware's receive threads)
    under SCHED_FIFO at `priority` (1-99), as robot control processes usually run.

    Returns None on success, or why it could not (it needs CAP_SYS_NICE or an rtprio limit, e.g.
    `@realtime - rtprio 98` in /etc/security/limits.conf); the caller logs it and runs on.
    """
    if not 1 <= priority <= 99:
        return f"realtime priority must be within 1..99, got {priority}"
    param = os.sched_param(priority)
    try:
        for tid in os.listdir("/proc/self/task"):
            os.sched_setscheduler(int(tid), os.SCHED_FIFO, param)
    except (PermissionError, OSError, AttributeError) as err:
        return f"SCHED_FIFO {priority} refused ({err})"
    return None


def freeze_startup_objects() -> int:
    """Put every object alive now (modules, the model, the policy, the node) out of the cyclic garbage
    collector's reach; returns how many. Call once a node is built, before it spins.

    A full collection walks every tracked object, and a process that imported torch and MuJoCo holds
    hundreds of thousands of them: in sim_robot_node one took 200-300 ms on a 2-core machine. On a wall
    clock that is far past a 50 Hz policy's 40 ms stale timeout: a robot process that pauses that long
    goes silent and the policy stops. Objects made later (messages, arrays) are still collected,
    cheaply, in the young generations.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
