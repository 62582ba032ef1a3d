# SPDX-License-Identifier: BSD-3-Clause
"""How far a fixed-base robot's servos let its default pose sag under gravity, and what would hold it.

The robot alone (its base welded to the world) starts at its default pose with every position servo
targeting it and is simulated until it settles; the static error is where it settles minus the
default pose. The stiffness that would hold a joint within `SAG_TOLERANCE_RAD` is |gravity torque|
at the default pose divided by that tolerance (the servo's steady-state error is torque / kp).
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from batonlab.robots.assets import compile_spec
from batonlab.robots.description import RobotDescription
from batonlab.robots.loader import EE_SITE, default_joint_pos, load

SAG_TOLERANCE_RAD = 0.01
"""Static joint error under gravity beyond which a pose is reported as sagging [rad or m]."""

EE_SAG_TOLERANCE_M = 0.01
"""End-effector displacement under gravity beyond which a pose is reported as sagging [m]."""

SETTLE_S = 3.0
"""Simulated time for the servos to settle [s]."""


@dataclass(frozen=True)
class GravitySag:
    """The default pose under gravity: per actuated joint, and at the end effector."""

    joints: tuple[str, ...]
    """Actuated joints, in model order."""
    static_error: np.ndarray
    """Settled position minus default position, shape (joints,) [rad or m]."""
    gravity_torque: np.ndarray
    """Torque the servos must supply against gravity at the default pose, shape (joints,) [N·m or N]."""
    stiffness: np.ndarray
    """The description's kp of each joint, shape (joints,) (velocity-controlled joints: nan)."""
    ee_displacement: float
    """Distance the end effector settles from its default position [m]; nan without an `ee_site`."""

    @property
    def holding_stiffness(self) -> np.ndarray:
        """kp that keeps each joint's static error within `SAG_TOLERANCE_RAD`, shape (joints,)."""
        return np.abs(self.gravity_torque) / SAG_TOLERANCE_RAD

    @property
    def sags(self) -> bool:
        """Whether a joint or the end effector settles beyond its tolerance."""
        joint_sag = bool(np.any(self._position_errors() > SAG_TOLERANCE_RAD))
        return joint_sag or bool(self.ee_displacement > EE_SAG_TOLERANCE_M)

    def report(self, robot: str) -> str:
        """One line saying how the pose sags, which joints cause it and how to hold it."""
        errors = self._position_errors()
        culprits = [k for k in np.argsort(-errors) if errors[k] > SAG_TOLERANCE_RAD][:3]
        joints = ", ".join(f"{self.joints[k]} {self.static_error[k]:+.3f} (kp {self.stiffness[k]:g}, holds within "
                           f"{SAG_TOLERANCE_RAD} at kp >= {self.holding_stiffness[k]:.0f})" for k in culprits)
        at_ee = "" if np.isnan(self.ee_displacement) else f"the end effector {100 * self.ee_displacement:.1f} cm off, "
        return (f"robot '{robot}': under gravity its servos hold the default pose with {at_ee}static joint errors "
                f"[rad or m] {joints or 'within tolerance'}; set `gravity_compensation: true` in its description "
                f"(when the robot's controllers compensate gravity) or raise those stiffnesses")

    def _position_errors(self) -> np.ndarray:
        """|static error| of the position-controlled joints, 0 for velocity-controlled ones (they turn freely)."""
        return np.where(np.isnan(self.stiffness), 0.0, np.abs(self.static_error))


def gravity_sag(description: RobotDescription) -> GravitySag | None:
    """The default pose's static error under gravity (None for a floating base, which stands instead)."""
    if description.base != "fixed":
        return None
    model = compile_spec(load(description))
    data = mujoco.MjData(model)
    names = description.joint_names
    qpos_adr = np.array([model.jnt_qposadr[model.joint(n).id] for n in names])
    dof_adr = np.array([model.jnt_dofadr[model.joint(n).id] for n in names])
    default = np.array([description.joint(n).default_pos for n in names])
    for name, value in default_joint_pos(description).items():  # followers (mimic joints) included
        data.qpos[model.jnt_qposadr[model.joint(name).id]] = value
    for name, target in zip(names, default):
        actuator = model.actuator(name).id
        data.ctrl[actuator] = target if description.joint(name).control == "position" else 0.0
    mujoco.mj_forward(model, data)
    gravity = (data.qfrc_bias - data.qfrc_gravcomp)[dof_adr].copy()
    ee = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, EE_SITE)
    ee_start = data.site_xpos[ee].copy() if ee >= 0 else None
    for _ in range(int(round(SETTLE_S / model.opt.timestep))):
        mujoco.mj_step(model, data)
    error = data.qpos[qpos_adr] - default
    stiffness = np.array([description.joint(n).stiffness if description.joint(n).control == "position" else np.nan
                          for n in names])
    moved = float(np.linalg.norm(data.site_xpos[ee] - ee_start)) if ee_start is not None else float("nan")
    return GravitySag(names, error, gravity, stiffness, moved)
