# SPDX-License-Identifier: BSD-3-Clause
"""Event terms on joint poses and servo targets at reset."""

from __future__ import annotations

import torch


def reset_joints_uniform(env, env_ids: torch.Tensor, joints: tuple[str, ...], position_range: tuple[float, float]) -> None:
    """Offset the reset pose of `joints` by U(position_range), clipped to the joint limits of limited joints
    [rad or m] (a continuous joint, whose range MuJoCo leaves at (0, 0), is not clipped)."""
    adr = env.scene.qpos_adr(joints)
    limits = env.scene.joint_limits(joints, env.device)
    offsets = env.uniform((len(env_ids), len(joints)), *position_range)
    rows = env.reset_qpos[env_ids]
    rows[:, adr] = (rows[:, adr] + offsets).clamp(limits[:, 0], limits[:, 1])
    env.reset_qpos[env_ids] = rows


def hold_default_pose(env, env_ids: torch.Tensor, joints: tuple[str, ...]) -> None:
    """Set the servo targets of `joints` (not driven by the policy, e.g. a stowed arm) to the default pose."""
    act = env.scene.actuator_for_joints(joints)
    ctrl = env.sim.ctrl
    ctrl[env_ids.to(ctrl.device)[:, None], act] = env.default_qpos[env.scene.qpos_adr(joints)].to(ctrl.device)
