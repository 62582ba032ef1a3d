# SPDX-License-Identifier: BSD-3-Clause
"""Observation terms of free objects (pose, velocity, touch, physics), exact simulation state."""

from __future__ import annotations

import torch

from batonlab.observations.root_state import root_quat_w
from batonlab.utils.quaternions import yaw_from_quat


def body_pos(env, body: str) -> torch.Tensor:
    """Position of a free body in the world frame [m], (num_envs, 3)."""
    qadr, _ = env.scene.free_body_adr(body)
    return env.sim.qpos[:, qadr : qadr + 3]


def body_quat(env, body: str) -> torch.Tensor:
    """Orientation (w, x, y, z) of a free body in the world frame, (num_envs, 4)."""
    qadr, _ = env.scene.free_body_adr(body)
    return env.sim.qpos[:, qadr + 3 : qadr + 7]


def body_lin_vel(env, body: str) -> torch.Tensor:
    """Linear velocity of a free body in the world frame [m/s], (num_envs, 3)."""
    _, vadr = env.scene.free_body_adr(body)
    return env.sim.qvel[:, vadr : vadr + 3]


def touch_flags(env, sensors: tuple[str, ...], threshold: float = 0.05) -> torch.Tensor:
    """1.0 where a touch sensor reads more than `threshold` [N], (num_envs, len(sensors))."""
    return torch.cat([(env.sim.sensor(s) > threshold).float() for s in sensors], dim=1)


def object_physics(env, event: str) -> torch.Tensor:
    """The object's randomised mass [kg], friction and size scale, (num_envs, 3), as drawn by the
    `RandomizeObject` event named `event`."""
    return env.event_manager.terms[event].physics


def ee_to_body(env, body: str, sensor: str) -> torch.Tensor:
    """Vector from a world-frame position sensor (the tool point) to a free body [m], (num_envs, 3)."""
    return body_pos(env, body) - env.sim.sensor(sensor)


def holder_velocity_heading(env, event: str, joint: str = "root") -> torch.Tensor:
    """(num_envs, 2) a moving holder's velocity in the robot's heading frame [m/s], from the `RandomizeHolderPath`
    event named `event` (simulation only)."""
    yaw = yaw_from_quat(root_quat_w(env, joint))
    velocity = env.event_manager.terms[event].velocity
    cos, sin = torch.cos(yaw), torch.sin(yaw)
    return torch.stack([cos * velocity[:, 0] + sin * velocity[:, 1], cos * velocity[:, 1] - sin * velocity[:, 0]], 1)
