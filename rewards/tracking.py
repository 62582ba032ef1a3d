# SPDX-License-Identifier: BSD-3-Clause
"""Tracking terms: how far a measured quantity is from its command."""

from __future__ import annotations

import torch


def position_command_error(env, command: str, sensor: str) -> torch.Tensor:
    """Distance between a position sensor (e.g. end-effector in the base frame) and a position command [m]."""
    return torch.linalg.vector_norm(env.sim.sensor(sensor) - env.command_manager.command(command), dim=-1)


def position_command_error_tanh(env, command: str, sensor: str, std: float) -> torch.Tensor:
    """`1 - tanh(distance / std)`: 1 on target, fading over a few `std` [m]; gives gradient far away."""
    return 1.0 - torch.tanh(position_command_error(env, command, sensor) / std)


def position_command_error_exp(env, command: str, sensor: str, std: float) -> torch.Tensor:
    """`exp(-distance² / std²)`: a sharp kernel that pays for the last centimetres [m]."""
    return torch.exp(-position_command_error(env, command, sensor).square() / std**2)


def position_command_progress(env, command: str, sensor: str, distance_scale: float) -> torch.Tensor:
    """`1 - distance / distance_scale` clipped to [0, 1]: how far along a reach is (the true progress)."""
    return (1.0 - position_command_error(env, command, sensor) / distance_scale).clamp(0.0, 1.0)


def position_command_reached(env, command: str, sensor: str, threshold: float) -> torch.Tensor:
    """True where the sensor is within `threshold` of the command [m]; used as a success term."""
    return position_command_error(env, command, sensor) < threshold
