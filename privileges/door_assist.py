# SPDX-License-Identifier: BSD-3-Clause
"""A virtual torque that helps open a door, scaled by the privilege level λ.

Opening a latched, spring-loaded door from a sparse "past 60°" success is a long sequence (reach the
handle, hold it, turn it, pull along an arc against the spring). While privileged, the door swings
open by itself once the tool point is at the handle: the policy learns to go to the handle and to
follow it, and `PrivilegeSchedule` fades the help until the policy pulls alone. The torque is a pure
couple about the hinge axis on the panel (`xfrc_applied[3:]`, world frame): the hinge turns it
entirely into opening torque, wherever the panel's centre of mass is, and it cannot turn the handle
or push the latch bolt (a latched door stays shut unless the latch is relaxed too).
"""

from __future__ import annotations

import mujoco
import torch

from batonlab.env.terms import PrivilegeTerm


class HingeAssist(PrivilegeTerm):
    """Privilege rule: `τ = λ · near · clip(kp · (target − θ), 0, max_torque)` about the hinge [N·m].

    `near` is 1 where the tool point is within `radius` of the handle, else 0; `θ` is the exact door
    angle. The torque fades as the door nears `target`, so the help alone leaves it short of an
    opening the spring resists more (the policy's own pull decides the rest).

    Args:
        body: The door panel (the body the hinge moves).
        hinge_joint: The panel's hinge; its positive direction opens the door.
        axis_sensor: A world-frame `framezaxis` sensor of a site whose z axis is the hinge axis.
        handle_sensor: A world-frame `framepos` sensor of the handle.
        ee_sensor: A world-frame `framepos` sensor of the tool point.
        max_torque: Cap of the torque at λ = 1 [N·m].
        kp: Torque per radian short of `target` [N·m/rad].
        target: Door angle where the help ends [rad].
        radius: The help acts only while the tool point is this close to the handle [m].
    """

    def __init__(self, env, body: str, hinge_joint: str, axis_sensor: str, handle_sensor: str, ee_sensor: str,
                 max_torque: float, kp: float, target: float, radius: float):
        if max_torque < 0 or kp < 0 or radius <= 0:
            raise ValueError("HingeAssist: need max_torque >= 0, kp >= 0 and radius > 0")
        self.env = env
        self.body_id = env.scene.body_id(body)
        model = env.scene.model
        joint = env.scene.joint_ids((hinge_joint,))[0]
        if int(model.jnt_bodyid[joint]) != self.body_id or int(model.jnt_type[joint]) != int(mujoco.mjtJoint.mjJNT_HINGE):
            raise ValueError(f"HingeAssist: '{hinge_joint}' must be the hinge joint of body '{body}'")
        self.qpos_adr = int(model.jnt_qposadr[joint])
        for name in (axis_sensor, handle_sensor, ee_sensor):
            env.sim.sensor(name)  # fail now on a wrong name
        self.axis_sensor, self.handle_sensor, self.ee_sensor = axis_sensor, handle_sensor, ee_sensor
        self.max_torque, self.kp, self.target, self.radius = float(max_torque), float(kp), float(target), float(radius)
        self.torque = torch.zeros(env.num_envs, device=env.device)
        """The torque of the last control step about the hinge axis [N·m], (num_envs,)."""

    def near(self, env) -> torch.Tensor:
        """(num_envs,) bool: the tool point is within `radius` of the handle."""
        return (env.sim.sensor(self.handle_sensor) - env.sim.sensor(self.ee_sensor)).norm(dim=1) < self.radius

    def apply(self, env) -> None:
        """Add `λ · near · clip(kp · (target − θ), 0, max_torque)` [N·m] about the hinge axis to the door panel."""
        level = env.privilege_manager.level
        if level <= 0.0:
            self.torque.zero_()
            return
        angle = env.sim.qpos[:, self.qpos_adr]
        torque = (self.kp * (self.target - angle)).clamp(0.0, self.max_torque)
        self.torque[:] = level * torque * self.near(env).float()
        env.sim.xfrc_applied[:, self.body_id, 3:6] += self.torque[:, None] * env.sim.sensor(self.axis_sensor)
