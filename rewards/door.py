# SPDX-License-Identifier: BSD-3-Clause
"""Door terms: reach the handle, open the door (progress toward the goal angle), the door is open.

Angles are the exact hinge angle (simulation state): the reward may know more than the policy sees.
"""

from __future__ import annotations

import torch

from batonlab.env.terms import ManagerTerm
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


class DoorPulledOpen(ManagerTerm):
    """Success term: at some step of the episode the door was open at least `angle` [rad] with the tool point within
    `radius` [m] of the handle (`door_opened_in_hand`): the opening was reached, by pulling (a door that swings
    back after it does not undo it)."""

    def __init__(self, env, joint: str, angle: float, handle_sensor: str, ee_sensor: str, radius: float):
        self.params = {"joint": joint, "angle": angle, "handle_sensor": handle_sensor, "ee_sensor": ee_sensor,
                       "radius": radius}
        self.reached = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        """(num_envs,) whether the episode has reached the opening so far."""

    def __call__(self, env) -> torch.Tensor:
        """(num_envs,) bool: reached at this step or before in the episode."""
        self.reached |= door_opened_in_hand(env, **self.params)
        return self.reached.clone()

    def reset(self, env_ids: torch.Tensor) -> None:
        """A new episode has not reached it."""
        self.reached[env_ids] = False
