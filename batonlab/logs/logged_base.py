# SPDX-License-Identifier: BSD-3-Clause
"""The logged odometry of a floating base, as open-loop replay uses it.

A robot with a free root joint starts each replayed segment from the logged base pose and twist,
is compared with the logged base at every sample (drift vs. odometry), and a base that jumps in
the log marks a reset. Odometry arrives on its own clock and the odom frame is the simulator's
world (`batonlab.deploy.bag_format`); this module hides both from the replay loop.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from batonlab.logs.bag_reader import OdomSeries, quat_yaw

_JUMP_M = 0.1
"""A logged base moving more than this [m] plus 3·|v|·Δt between two odometry samples is a reset."""


def free_root(model: mujoco.MjModel) -> tuple[int, int] | None:
    """(qpos, dof) address of the robot's free root joint (the model's first joint), or None for a fixed base."""
    if model.njnt and int(model.jnt_type[0]) == int(mujoco.mjtJoint.mjJNT_FREE):
        return int(model.jnt_qposadr[0]), int(model.jnt_dofadr[0])
    return None


class LoggedBase:
    """The logged odometry of a floating base, looked up at replay sample times.

    Args:
        odom: The bag's odometry.
        times: Its sample times on the joint states' clock [s].
        model: The replayed model (its free root joint is set from the odometry).
        default_qpos: (nq,) the model's default pose (its base height stands in for planar odometry's).
    """

    _MAX_AGE_S = 0.1
    """An odometry sample further than this from a sample time does not describe the base there [s]."""

    def __init__(self, odom: OdomSeries, times: np.ndarray, model: mujoco.MjModel, default_qpos):
        self.times = times
        self.position = odom.position
        self.orientation = odom.orientation_wxyz / np.linalg.norm(odom.orientation_wxyz, axis=1, keepdims=True)
        self.linear_w, self.angular_b = odom.twist_world_body()
        self.yaw = odom.yaw
        self.planar = bool(np.all(np.abs(odom.position[:, 2]) < 1e-6))
        self.qadr, self.dadr = free_root(model)
        self.default_z = float(default_qpos[self.qadr + 2])

    def _index(self, t: float) -> int | None:
        """The odometry sample nearest to `t`, or None if none is within `_MAX_AGE_S`."""
        k = int(np.searchsorted(self.times, t))
        near = [i for i in (k - 1, k) if 0 <= i < len(self.times)]
        if not near:
            return None
        i = min(near, key=lambda i: abs(self.times[i] - t))
        return i if abs(self.times[i] - t) <= self._MAX_AGE_S else None

    def at(self, t: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """(position, orientation wxyz, linear velocity in the world, angular velocity in the body) at `t`."""
        i = self._index(t)
        if i is None:
            return None
        return self.position[i], self.orientation[i], self.linear_w[i], self.angular_b[i]

    def pose_near(self, t: float) -> np.ndarray:
        """(x, y, z, yaw) logged at `t`; NaN without a sample near it."""
        i = self._index(t)
        return np.full(4, np.nan) if i is None else np.array([*self.position[i], self.yaw[i]])

    def set_state(self, qpos, qvel, position, orientation, linear_w, angular_b) -> None:
        """Write the logged base pose and twist into a full qpos / qvel (torch tensors or numpy arrays, in place)."""
        q, d = self.qadr, self.dadr
        qpos[q : q + 3] = torch.as_tensor(position, dtype=torch.float64)
        if self.planar:
            qpos[q + 2] = self.default_z
        qpos[q + 3 : q + 7] = torch.as_tensor(orientation, dtype=torch.float64)
        qvel[d : d + 3] = torch.as_tensor(linear_w, dtype=torch.float64)
        qvel[d + 3 : d + 6] = torch.as_tensor(angular_b, dtype=torch.float64)

    def sim_pose(self, qpos: np.ndarray) -> np.ndarray:
        """(x, y, z, yaw) of the base in a simulated qpos (nq,)."""
        q = self.qadr
        return np.array([*qpos[q : q + 3], quat_yaw(qpos[q + 3 : q + 7])])

    def jumps(self, t0: float, t1: float) -> bool:
        """Whether the logged base moved between `t0` and `t1` faster than its logged velocity allows (a reset)."""
        i, j = self._index(t0), self._index(t1)
        if i is None or j is None or i == j:
            return False
        speed = max(np.linalg.norm(self.linear_w[i]), np.linalg.norm(self.linear_w[j]))
        step = np.linalg.norm(self.position[j] - self.position[i])
        return bool(step > _JUMP_M + 3.0 * speed * abs(self.times[j] - self.times[i]))
