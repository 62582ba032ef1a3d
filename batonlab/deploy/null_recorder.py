# SPDX-License-Identifier: BSD-3-Clause
"""`NullRecorder`: `BagRecorder`'s interface, recording nothing, for a caller that was asked not to record.

It lets a control loop call its recorder unconditionally. Kept apart from `batonlab.deploy.recording`
so that not recording imports none of the bag writer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["NullRecorder"]


class NullRecorder:
    """A recorder that drops every call: always `ok`, nothing pending, an empty `status()`."""

    enabled = False
    """False: nothing is recorded (`BagRecorder.enabled` is True)."""
    path = None
    """No bag."""
    error = None
    """Never an error."""

    @property
    def ok(self) -> bool:
        """Always True: there is nothing to fail."""
        return True

    @property
    def pending(self) -> int:
        """Always 0."""
        return 0

    def status(self) -> dict[str, Any]:
        """No values for diagnostics."""
        return {}

    def joint_state(self, stamp_ns: int, position, velocity=None, effort=None, names: Sequence[str] | None = None,
                    header_ns: int | None = None) -> None:
        """Dropped."""

    def imu(self, stamp_ns: int, orientation_wxyz, angular_velocity, linear_acceleration, frame_id: str = "",
            header_ns: int | None = None) -> None:
        """Dropped."""

    def odom(self, stamp_ns: int, position, orientation_wxyz, linear_velocity, angular_velocity, frame_id: str = "odom",
             child_frame_id: str = "", header_ns: int | None = None) -> None:
        """Dropped."""

    def twist(self, stamp_ns: int, linear, angular) -> None:
        """Dropped."""

    def joint_command(self, stamp_ns: int, values) -> None:
        """Dropped."""

    def task_command(self, name: str, stamp_ns: int, values, frame_id: str = "", header_ns: int | None = None) -> None:
        """Dropped."""

    def task_command_pose(self, name: str, stamp_ns: int, values, frame_id: str = "",
                          header_ns: int | None = None) -> None:
        """Dropped."""

    def sensor(self, name: str, stamp_ns: int, values, frame_id: str = "", header_ns: int | None = None) -> None:
        """Dropped."""

    def sensor_pose(self, name: str, stamp_ns: int, values, frame_id: str = "", header_ns: int | None = None) -> None:
        """Dropped."""

    def policy_step(self, stamp_ns: int, step: int, observation, action_raw, action_filtered=None,
                    safety_state: str = "", safety_reason: str = "", episode: int = 0, input_ns: int = 0,
                    compute_time_s: float = 0.0) -> None:
        """Dropped."""

    def close(self, timeout_s: float = 0.0) -> dict[str, Any]:
        """Nothing to close; returns `status()` (empty)."""
        return self.status()

    def __enter__(self) -> NullRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
