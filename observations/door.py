# SPDX-License-Identifier: BSD-3-Clause
"""Observation terms of hinged doors (`batonlab.robots.door`): exact angles, handle offsets, physics."""

from __future__ import annotations

import torch


def joint_angle(env, joint: str) -> torch.Tensor:
    """Exact position of a 1-DoF joint (a door's hinge, its handle) [rad or m], (num_envs,)."""
    return env.sim.qpos[:, int(env.scene.qpos_adr((joint,))[0])]


def sensor_offset(env, target: str, origin: str) -> torch.Tensor:
    """Vector from one world-frame position sensor to another (tool point → handle) [m], (num_envs, 3)."""
    return env.sim.sensor(target) - env.sim.sensor(origin)


def door_physics(env, event: str) -> torch.Tensor:
    """What the `RandomizeDoor` event named `event` drew for each env, (num_envs, 10) (`RandomizeDoor.physics`)."""
    return env.event_manager.terms[event].physics


def contacts_relaxed(env, privilege: str) -> torch.Tensor:
    """1.0 where the `RelaxedContacts` privilege named `privilege` has its pairs relaxed (a latch off), (num_envs, 1)."""
    return env.privilege_manager.terms[privilege].relaxed.float().unsqueeze(1)
