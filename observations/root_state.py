# SPDX-License-Identifier: BSD-3-Clause
"""Observation terms of a floating base's exact state, read from its free joint (privileged)."""

from __future__ import annotations

import torch

from batonlab.utils.quaternions import quat_rotate, quat_rotate_inverse, yaw_from_quat


def root_pos_w(env, joint: str = "root") -> torch.Tensor:
    """Root position in the world (N, 3) [m]."""
    return _root_qpos(env, joint)[:, :3]


def root_quat_w(env, joint: str = "root") -> torch.Tensor:
    """Root orientation (N, 4) wxyz."""
    return _root_qpos(env, joint)[:, 3:7]


def root_lin_vel_w(env, joint: str = "root") -> torch.Tensor:
    """Root linear velocity in the world frame (N, 3) [m/s]."""
    return _root_qvel(env, joint)[:, :3]


def root_ang_vel_b(env, joint: str = "root") -> torch.Tensor:
    """Root angular velocity in the body frame (N, 3) [rad/s]."""
    return _root_qvel(env, joint)[:, 3:6]


def _root_qpos(env, joint: str) -> torch.Tensor:
    """The free joint's 7 qpos columns (N, 7): position [m], then quaternion wxyz."""
    q = env.scene.free_joint_adr(joint)[0]
    return env.sim.qpos[:, q : q + 7]


def _root_qvel(env, joint: str) -> torch.Tensor:
    """The free joint's 6 qvel columns (N, 6): linear (world) [m/s], then angular (body) [rad/s] velocity."""
    d = env.scene.free_joint_adr(joint)[1]
    return env.sim.qvel[:, d : d + 6]


def root_lin_vel_b(env, joint: str = "root") -> torch.Tensor:
    """Root linear velocity in the body frame (N, 3) [m/s] (privileged: a robot estimates it)."""
    return quat_rotate_inverse(root_quat_w(env, joint), root_lin_vel_w(env, joint))


def root_lin_vel_heading(env, joint: str = "root") -> torch.Tensor:
    """Root linear velocity in the heading frame (N, 3) [m/s]: x forward on the ground, z up."""
    yaw = yaw_from_quat(root_quat_w(env, joint))
    v = root_lin_vel_w(env, joint)
    c, s = torch.cos(yaw), torch.sin(yaw)
    return torch.stack((c * v[:, 0] + s * v[:, 1], -s * v[:, 0] + c * v[:, 1], v[:, 2]), dim=-1)


def root_yaw_rate_w(env, joint: str = "root") -> torch.Tensor:
    """Turning rate about the world z axis (N,) [rad/s]."""
    return quat_rotate(root_quat_w(env, joint), root_ang_vel_b(env, joint))[:, 2]


def root_projected_gravity(env, joint: str = "root") -> torch.Tensor:
    """Unit gravity direction in the body frame (N, 3); (0, 0, -1) when upright."""
    q = root_quat_w(env, joint)
    down = torch.zeros(q.shape[0], 3, device=q.device)
    down[:, 2] = -1.0
    return quat_rotate_inverse(q, down)


def base_height(env, base_sensor: str, wheel_sensors: tuple[str, ...], wheel_radius: float) -> torch.Tensor:
    """Height of the base above the ground under its wheels (N,) [m], from world `framepos` sensors.

    Measured from the wheel centres rather than from z = 0, so it means the same on any terrain.
    """
    wheel_z = torch.stack([env.sim.sensor(s)[:, 2] for s in wheel_sensors], dim=-1).mean(dim=-1)
    return env.sim.sensor(base_sensor)[:, 2] - wheel_z + wheel_radius
