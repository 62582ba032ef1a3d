# SPDX-License-Identifier: BSD-3-Clause
"""Door terms: reach the handle, open the door (progress toward the goal angle), the door is open.

Angles are the exact hinge angle (simulation state): the reward may know more than the policy sees.
"""

from __future__ import annotations

import torch

from batonlab.observations.door import joint_angle, sensor_offset


def reach_handle_tanh(env, handle_sensor: str, ee_sensor: str, std: float) -> torch.Tensor:
    """`1 - tanh(distance / std)` from the tool point to the handle (world-frame position sensors) [m]."""
    return 1.0 - torch.tanh(sensor_offset(env, handle_sensor, ee_sensor).norm(dim=1) / std)


def door_open_progress(env, joint: str, angle: float) -> torch.Tensor:
    """Fraction of the goal opening achieved, clipped to [0, 1]: rewards every degree on the way."""
    return (joint_angle(env, joint) / angle).clamp(0.0, 1.0)


def door_opened(env, joint: str, angle: float) -> torch.Tensor:
    """True where the door is open at least `angle` [rad] (the success of `arm_door`)."""
    return joint_angle(env, joint) >= angle


def door_opened_in_hand(env, joint: str, angle: float, handle_sensor: str, ee_sensor: str, radius: float) -> torch.Tensor:
    """True where the door is open at least `angle` [rad] with the tool point within `radius` [m] of the handle (the door
    was pulled open, not knocked open and let go)."""
    held = sensor_offset(env, handle_sensor, ee_sensor).norm(dim=1) < radius
    return door_opened(env, joint, angle) & held
