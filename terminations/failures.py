# SPDX-License-Identifier: BSD-3-Clause
"""Termination terms that end an episode as a failure (contacts, tilt) or a time-out (terrain edge)."""

from __future__ import annotations

import math

import torch

from batonlab.observations.root_state import root_pos_w, root_projected_gravity


def illegal_contact(env, sensors: tuple[str, ...], force_threshold: float = 1.0) -> torch.Tensor:
    """True where any contact sensor (data "found force", net force) reports more than `force_threshold` [N]."""
    forces = torch.stack([torch.linalg.vector_norm(env.sim.sensor(s)[:, 1:4], dim=-1) for s in sensors], dim=-1)
    return (forces > force_threshold).any(dim=-1)


def bad_orientation(env, limit_angle: float, joint: str = "root") -> torch.Tensor:
    """True where the base is tilted more than `limit_angle` from upright [rad]."""
    return root_projected_gravity(env, joint)[:, 2] > -math.cos(limit_angle)


def out_of_terrain_bounds(env, margin: float = 1.0, joint: str = "root") -> torch.Tensor:
    """True where the base is within `margin` of the edge of the terrain grid [m] (use as a time-out)."""
    terrain = env.terrain.terrain
    if terrain is None or terrain.heights is None:
        return torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
    half_x, half_y = (s / 2 - margin for s in terrain.size_xy)
    pos = root_pos_w(env, joint)
    return (pos[:, 0].abs() > half_x) | (pos[:, 1].abs() > half_y)
