# SPDX-License-Identifier: BSD-3-Clause
"""What an open-loop replay measured: simulated vs. logged joints and floating base, and their summaries.

Kept apart from the replay loop (`open_loop.py`) because the report and the CLI read it without
running a simulator: it is plain arrays and the statistics over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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
        """Largest finite |sim - log| over steps and position-compared joints (0 if none)."""
        err = np.abs(self.error)
        return float(np.nanmax(err)) if np.isfinite(err).any() else 0.0

    # Floating base.

    @property
    def has_base(self) -> bool:
        """Whether the replay has a finite base drift to report."""
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
