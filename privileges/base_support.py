# SPDX-License-Identifier: BSD-3-Clause
"""A virtual torque that holds a balancing base upright, scaled by the privilege level λ.

A wheel-legged robot falls in a second without a balance controller. While privileged, a virtual hand keeps its
torso level, so that a scripted lower level (`batonlab.actions.ScriptedWholeBodyAction`) or an early policy can drive
and reach without balancing; a schedule fades it until the policy balances alone.
"""

from __future__ import annotations

import torch

from batonlab.env.terms import PrivilegeTerm
from batonlab.observations.root_state import root_ang_vel_b, root_quat_w
from batonlab.utils.quaternions import quat_rotate


class BaseSupport(PrivilegeTerm):
    """Privilege rule: `τ = λ · clip(kp · (z_b × ẑ) − kd · ω_xy, ±max_torque)` on the base [N·m, world frame]: a
    torque toward upright about the horizontal axes, never about the vertical (heading stays the policy's).

    Args:
        body: The base body. root_joint: Its free joint.
        kp: Torque per radian of tilt [N·m/rad]. kd: Torque per rad/s of roll and pitch rate [N·m·s/rad].
        max_torque: Cap per axis at λ = 1 [N·m].
    """

    def __init__(self, env, body: str, kp: float, kd: float, max_torque: float, root_joint: str = "root"):
        if kp < 0 or kd < 0 or max_torque < 0:
            raise ValueError("BaseSupport: kp, kd and max_torque must be >= 0")
        self.body_id = env.scene.body_id(body)
        self.root_joint = root_joint
        self.kp, self.kd, self.max_torque = float(kp), float(kd), float(max_torque)
        self.torque = torch.zeros(env.num_envs, 3, device=env.device)
        """The torque of the last control step [N·m, world frame], (num_envs, 3)."""

    def apply(self, env) -> None:
        """Add the upright-holding torque, scaled by λ, to the base."""
        level = env.privilege_manager.level
        if level <= 0.0:
            self.torque.zero_()
            return
        quat = root_quat_w(env, self.root_joint)
        up = torch.zeros_like(quat[:, 1:])
        up[:, 2] = 1.0
        body_up = quat_rotate(quat, up)
        spin = quat_rotate(quat, root_ang_vel_b(env, self.root_joint))
        spin[:, 2] = 0.0
        tilt = torch.linalg.cross(body_up, up, dim=1)
        self.torque[:] = level * (self.kp * tilt - self.kd * spin).clamp(-self.max_torque, self.max_torque)
        env.sim.xfrc_applied[:, self.body_id, 3:6] += self.torque
