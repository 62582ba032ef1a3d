# SPDX-License-Identifier: BSD-3-Clause
"""Pose readings on the robot side: what counts as one, and the one form the policy sees.

A pose sensor (`observations.sensor_pose` in training, e.g. a perception node's `sensors/object_pose`) is
seven numbers: position [m] then orientation quaternion (w, x, y, z), both in the frame the manifest
names. Two things a quaternion carries that a rotation does not:

- its length: a perception node renormalises every estimate, and MuJoCo's `framequat` is unit to
  float precision, so a quaternion whose length is off by more than `QUAT_NORM_TOLERANCE` is a broken
  estimate (a zero "no estimate" placeholder, a wrong field order, a unit mix-up), not a rotation;
  the runtime treats it as it treats a non-finite reading (`pose_problem`);
- its sign: q and -q are the same orientation. Estimators pick either; the policy sees the one with
  w >= 0 (`canonical_pose`), the hemisphere MuJoCo's quaternions of an object that starts near the
  reference frame's orientation stay in while it turns less than half a turn.
"""

from __future__ import annotations

import numpy as np

POSE_DIM = 7
"""Position (3) [m] then orientation quaternion (w, x, y, z) (4)."""

POSE_FIELDS = ("x", "y", "z", "qw", "qx", "qy", "qz")
"""The field names of a pose command (the manifest's `commands.<name>.fields`)."""

QUAT_NORM_TOLERANCE = 0.01
"""A pose whose quaternion's length differs from 1 by more than this is not a reading."""


def pose_problem(values: np.ndarray) -> str | None:
    """Why `values` (7,) is not a pose reading, or None when it is one."""
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (POSE_DIM,):
        return f"a pose has {POSE_DIM} values (x, y, z, qw, qx, qy, qz), got {values.size}"
    if not np.isfinite(values).all():
        return f"non-finite pose {values.tolist()}"
    norm = float(np.linalg.norm(values[3:]))
    if abs(norm - 1.0) > QUAT_NORM_TOLERANCE:
        return (f"quaternion (w, x, y, z) {values[3:].tolist()} has length {norm:.4f}, not 1 "
                f"(tolerance {QUAT_NORM_TOLERANCE})")
    return None


def canonical_pose(values: np.ndarray) -> np.ndarray:
    """The pose with its quaternion scaled to unit length and in the hemisphere w >= 0.

    Args:
        values: (7,) position [m] then quaternion (w, x, y, z).

    Returns:
        (7,) float64, a new array. A zero or non-finite quaternion yields NaN (which stops the robot).
    """
    pose = np.array(values, dtype=np.float64)
    quat = pose[3:]
    with np.errstate(divide="ignore", invalid="ignore"):
        quat /= np.sqrt(quat @ quat)
    if quat[0] < 0.0:
        quat *= -1.0
    return pose
