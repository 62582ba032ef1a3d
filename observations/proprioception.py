# SPDX-License-Identifier: BSD-3-Clause
"""Observation terms of the robot's own joints and actions, as its encoders and its last command give them."""

from __future__ import annotations

import torch


def joint_pos_rel(env, joints: tuple[str, ...]) -> torch.Tensor:
    """Joint positions minus the default pose, in the given order [rad or m], (num_envs, len(joints))."""
    adr = env.scene.qpos_adr(joints)
    return env.sim.qpos.index_select(1, adr) - env.default_qpos[adr]


def joint_vel(env, joints: tuple[str, ...]) -> torch.Tensor:
    """Joint velocities in the given order [rad/s or m/s], (num_envs, len(joints))."""
    return env.sim.qvel.index_select(1, env.scene.dof_adr(joints))


def last_action(env) -> torch.Tensor:
    """The deployable policy output of the previous step (raw, before scaling), (num_envs, num_actions
    - privileged dims): a robot knows the actions it executed, never the virtual forces of training."""
    manager = env.action_manager
    return manager.action[:, : manager.action_dim - manager.privileged_dim]
