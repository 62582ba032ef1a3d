# SPDX-License-Identifier: BSD-3-Clause
"""Constraint costs for constrained RL (`TaskCfg.costs`): indicators, 1.0 on a step in violation.

Indicators make a cost's mean the fraction of steps in violation, so a limit reads the same for
every constraint ("at most 1 % of the time") and the cost critic learns a probability, which is
bounded and well scaled whatever the physical quantity behind it.
"""

from __future__ import annotations

import torch
from batonlab.env.terms import ManagerTerm


class ActuatorForceOverLimit(ManagerTerm):
    """1.0 where any of `joints`' actuators uses more than `fraction` of its torque limit.

    The limits are the actuators' `forcerange` in the model (the motor limits the MJCF documents);
    the forces come from `actuatorfrc` sensors named `<joint>_torque`. Near its limit a servo stops
    tracking and heats; an arm held at its limit is also one whose reaction torque pushes the base.

    Args:
        joints: The joints whose actuators are watched.
        fraction: Share of the torque limit that counts as a violation [-].
    """

    def __init__(self, env, joints: tuple[str, ...], fraction: float = 0.8):
        if not 0.0 < fraction <= 1.0:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        model = env.scene.model
        actuators = env.scene.actuator_for_joints(joints).tolist()
        upper = torch.as_tensor(abs(model.actuator_forcerange[actuators]).max(axis=1), dtype=torch.float32)
        if not bool((upper > 0).all()):
            unlimited = [j for j, u in zip(joints, upper.tolist()) if u <= 0]
            raise ValueError(f"actuators of {unlimited} have no forcerange: nothing to compare against")
        self.sensors = tuple(f"{j}_torque" for j in joints)
        missing = [s for s in self.sensors if not env.sim.has_sensor(s)]
        if missing:
            raise KeyError(f"ActuatorForceOverLimit needs actuatorfrc sensors {missing} in the scene")
        self.threshold = (fraction * upper).to(env.device)

    def __call__(self, env) -> torch.Tensor:
        force = torch.cat([env.sim.sensor(s) for s in self.sensors], dim=-1)
        return (force.abs() > self.threshold).any(dim=-1).float()


def position_outside_shell(env, sensor: str, center: tuple[float, float, float], min_radius: float,
                           max_radius: float) -> torch.Tensor:
    """1.0 where a position sensor is nearer to `center` than `min_radius` or farther than `max_radius` [m].

    For an arm: the end-effector's distance from the shoulder; too near, the arm folds into itself,
    too far, it works stretched near its singularity (torques peak, small errors need large motions).
    """
    radius = torch.linalg.vector_norm(env.sim.sensor(sensor) - torch.tensor(center, device=env.device), dim=-1)
    return ((radius < min_radius) | (radius > max_radius)).float()


def any_contact(env, sensors: tuple[str, ...]) -> torch.Tensor:
    """1.0 where any MuJoCo contact sensor (data "found ...") reports a contact."""
    found = torch.stack([env.sim.sensor(s)[:, 0] for s in sensors], dim=-1)
    return (found > 0).any(dim=-1).float()
