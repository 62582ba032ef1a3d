# SPDX-License-Identifier: BSD-3-Clause
"""Tracking terms: how far a measured quantity is from its command."""

from __future__ import annotations

import torch

from batonlab.env.terms import ProgressTerm
from batonlab.utils.quaternions import quat_angle_between


def position_command_error(env, command: str, sensor: str) -> torch.Tensor:
    """Distance between a position sensor (e.g. end-effector in the base frame) and the position of a point or pose
    command (its first three components) [m]."""
    return torch.linalg.vector_norm(env.sim.sensor(sensor) - env.command_manager.command(command)[:, :3], dim=-1)


def orientation_command_error(env, command: str, sensor: str) -> torch.Tensor:
    """Angle between a `framequat` sensor and the orientation of a pose command (components 3:7, w x y z) [rad]."""
    return quat_angle_between(env.sim.sensor(sensor), env.command_manager.command(command)[:, 3:7])


def orientation_command_error_exp(env, command: str, sensor: str, std: float) -> torch.Tensor:
    """`exp(-angle² / std²)` of `orientation_command_error` [rad]."""
    return torch.exp(-orientation_command_error(env, command, sensor).square() / std**2)


def position_command_error_tanh(env, command: str, sensor: str, std: float) -> torch.Tensor:
    """`1 - tanh(distance / std)`: 1 on target, fading over a few `std` [m]; gives gradient far away."""
    return 1.0 - torch.tanh(position_command_error(env, command, sensor) / std)


def position_command_error_exp(env, command: str, sensor: str, std: float) -> torch.Tensor:
    """`exp(-distance² / std²)`: a sharp kernel that pays for the last centimetres [m]."""
    return torch.exp(-position_command_error(env, command, sensor).square() / std**2)


class PositionCommandProgress(ProgressTerm):
    """True progress of a reach: `1 - d / d_ref` clipped to [0, 1], d the sensor-to-command distance [m], d_ref
    `distance_scale` [m] for a state alone or the episode's first distance (`start`)."""

    def __init__(self, env, command: str, sensor: str, distance_scale: float):
        self.command, self.sensor, self.distance_scale = command, sensor, distance_scale

    def measure(self, env) -> torch.Tensor:
        """(num_envs, 1) the distance [m]."""
        return position_command_error(env, self.command, self.sensor).unsqueeze(-1)

    def progress(self, measures: torch.Tensor, start: torch.Tensor | None = None) -> torch.Tensor:
        """(...) progress `1 - d / d_ref` clipped to [0, 1]; d_ref: `distance_scale` or the start distance [m]."""
        reference = self.distance_scale if start is None else start[..., 0].clamp(min=1e-6)
        return (1.0 - measures[..., 0] / reference).clamp(0.0, 1.0)


def position_command_reached(env, command: str, sensor: str, threshold: float) -> torch.Tensor:
    """True where the sensor is within `threshold` of the command [m]; used as a success term."""
    return position_command_error(env, command, sensor) < threshold
