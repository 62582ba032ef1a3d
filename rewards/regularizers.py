# SPDX-License-Identifier: BSD-3-Clause
"""Regularisers: smoothness and effort penalties (use with negative weights)."""

from __future__ import annotations

import torch


def action_rate_l2(env) -> torch.Tensor:
    """Squared change of the policy output between steps, summed over actions."""
    return (env.action_manager.action - env.action_manager.prev_action).square().sum(dim=-1)


def action_l2(env) -> torch.Tensor:
    """Squared policy output, summed over actions."""
    return env.action_manager.action.square().sum(dim=-1)


def joint_vel_l2(env, joints: tuple[str, ...]) -> torch.Tensor:
    """Squared joint velocities summed over `joints` [rad²/s²]."""
    return env.sim.qvel.index_select(1, env.scene.dof_adr(joints)).square().sum(dim=-1)


def joint_pos_limits(env, joints: tuple[str, ...], margin: float = 0.0) -> torch.Tensor:
    """How far joints are beyond their limits shrunk by `margin`, summed [rad]."""
    ids = env.scene.joint_ids(joints)
    limits = torch.as_tensor(env.scene.model.jnt_range[ids], dtype=torch.float32, device=env.device)
    q = env.sim.qpos.index_select(1, env.scene.qpos_adr(joints))
    below = (limits[:, 0] + margin - q).clamp(min=0.0)
    above = (q - limits[:, 1] + margin).clamp(min=0.0)
    return (below + above).sum(dim=-1)
