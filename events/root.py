# SPDX-License-Identifier: BSD-3-Clause
"""Event terms on a floating base: its reset pose on the terrain and pushes."""

from __future__ import annotations

import torch

from batonlab.events.sampling import uniform_or_zero
from batonlab.utils.quaternions import quat_from_euler_xyz, quat_mul


def push_by_setting_velocity(env, env_ids: torch.Tensor, velocity_range: dict[str, tuple[float, float]], joint: str) -> None:
    """Add a random velocity to a free joint (a push) [m/s, rad/s]; keys among x, y, z, roll, pitch, yaw."""
    dof = int(env.scene.model.jnt_dofadr[env.scene.joint_ids([joint])[0]])
    qpos, qvel = env.sim.qpos[env_ids].clone(), env.sim.qvel[env_ids].clone()
    for k, axis in enumerate(("x", "y", "z", "roll", "pitch", "yaw")):
        if axis in velocity_range:
            qvel[:, dof + k] += env.uniform(len(env_ids), *velocity_range[axis])
    env.sim.reset(env_ids, qpos, qvel)


def reset_root_on_terrain(
    env,
    env_ids: torch.Tensor,
    position_range: dict[str, tuple[float, float]] | None = None,
    orientation_range: dict[str, tuple[float, float]] | None = None,
    velocity_range: dict[str, tuple[float, float]] | None = None,
    joint: str = "root",
) -> None:
    """Place the root on the env's terrain tile: default pose + origin + uniform offsets.

    Args:
        position_range: offsets [m], keys among x, y, z (z: drop height above the default).
        orientation_range: roll, pitch, yaw [rad], applied on top of the default orientation.
        velocity_range: x, y, z (world frame) [m/s] and roll, pitch, yaw (body frame) [rad/s].
    """
    q, d = env.scene.free_joint_adr(joint)
    n = len(env_ids)
    rows = env.reset_qpos[env_ids]
    offset = torch.stack([uniform_or_zero(env, n, position_range, k) for k in ("x", "y", "z")], dim=-1)
    rows[:, q : q + 3] = env.default_qpos[q : q + 3] + env.terrain.env_origins[env_ids] + offset
    delta = quat_from_euler_xyz(*(uniform_or_zero(env, n, orientation_range, k) for k in ("roll", "pitch", "yaw")))
    rows[:, q + 3 : q + 7] = quat_mul(delta, env.default_qpos[q + 3 : q + 7].expand(n, 4))
    env.reset_qpos[env_ids] = rows
    vel = env.reset_qvel[env_ids]
    axes = ("x", "y", "z", "roll", "pitch", "yaw")
    vel[:, d : d + 6] = torch.stack([uniform_or_zero(env, n, velocity_range, k) for k in axes], dim=-1)
    env.reset_qvel[env_ids] = vel

