# SPDX-License-Identifier: BSD-3-Clause
"""Observation terms read from named MuJoCo sensors, as a robot's own sensors give them."""

from __future__ import annotations

import torch

from batonlab.utils.quaternions import quat_canonical, quat_rotate_inverse


def sensor(env, name: str) -> torch.Tensor:
    """A named MuJoCo sensor, (num_envs, dim)."""
    return env.sim.sensor(name)


def sensor_pose(env, name: str, position: str, orientation: str) -> torch.Tensor:
    """A pose from two MuJoCo sensors, (num_envs, 7): position [m] then quaternion (w, x, y, z), w >= 0.

    `name` is what the robot calls the pose (its topic `sensors/<name>`, e.g. a perception node's
    `object_pose`); `position` / `orientation` are the `framepos` / `framequat` sensors that give it
    in simulation, in the same reference frame.
    """
    # q and -q are one orientation: the robot side reports w >= 0, so training does too.
    return torch.cat([env.sim.sensor(position), quat_canonical(env.sim.sensor(orientation))], dim=1)


def projected_gravity(env, sensor: str = "imu_quat") -> torch.Tensor:
    """Gravity direction in the IMU frame (N, 3) from a `framequat` sensor, as a robot's IMU gives it."""
    q = env.sim.sensor(sensor)
    down = torch.zeros(q.shape[0], 3, device=q.device)
    down[:, 2] = -1.0
    return quat_rotate_inverse(q, down)
