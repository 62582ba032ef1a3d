# SPDX-License-Identifier: BSD-3-Clause
"""Manipulation terms: reaching an object, lifting it, opening a door; one parsimonious set per task.

Heights are measured from each env's resting height of the object (its randomised half height above
the table), so a smaller cube is not "lifted" more for lying lower.
"""

from __future__ import annotations

import torch

from batonlab.env.terms import ProgressTerm
from batonlab.observations.objects import body_pos, ee_to_body, touch_flags
from batonlab.utils.quaternions import quat_rotate


def reach_object_tanh(env, body: str, sensor: str, std: float) -> torch.Tensor:
    """`1 - tanh(distance / std)` from the tool point (world-frame sensor) to the object [m]."""
    return 1.0 - torch.tanh(ee_to_body(env, body, sensor).norm(dim=1) / std)


def object_height(env, body: str, event: str) -> torch.Tensor:
    """Height of the object's centre above its resting height [m], (num_envs,)."""
    rest = env.event_manager.terms[event].half_height
    return body_pos(env, body)[:, 2] - rest


class LiftProgress(ProgressTerm):
    """True progress of a grasp-and-lift: half for the reach (`1 - d / d_ref`, d tool point to object [m], d_ref
    `distance_scale` or the episode's first distance), half for the lift (height over `height` [m]), each in [0, 1]."""

    def __init__(self, env, body: str, event: str, sensor: str, height: float, distance_scale: float):
        self.body, self.event, self.sensor, self.height, self.distance_scale = body, event, sensor, height, distance_scale

    def measure(self, env) -> torch.Tensor:
        """(num_envs, 2): tool point to object distance [m], object height above its resting height [m]."""
        distance = ee_to_body(env, self.body, self.sensor).norm(dim=1)
        return torch.stack([distance, object_height(env, self.body, self.event)], dim=1)

    def progress(self, measures: torch.Tensor, start: torch.Tensor | None = None) -> torch.Tensor:
        """(...) progress in [0, 1]: half the reach `1 - d / d_ref`, half the lift (height / `height`), each clipped."""
        reference = self.distance_scale if start is None else start[..., 0].clamp(min=1e-6)
        reach = (1.0 - measures[..., 0] / reference).clamp(0.0, 1.0)
        return 0.5 * reach + 0.5 * (measures[..., 1] / self.height).clamp(0.0, 1.0)


def object_in_hand(env, body: str, sensor: str, radius: float, touch_sensors: tuple[str, ...] = (),
                   touch_threshold: float = 0.05) -> torch.Tensor:
    """True where the object is in the hand: its centre within `radius` of the tool point [m] and, if
    `touch_sensors` are given, every fingertip touching something (a grasp, not an arm hugging it)."""
    held = ee_to_body(env, body, sensor).norm(dim=1) < radius
    if touch_sensors:
        held &= (touch_flags(env, touch_sensors, touch_threshold) > 0).all(dim=1)
    return held


def lift_progress(env, body: str, event: str, height: float, sensor: str, radius: float,
                  touch_sensors: tuple[str, ...] = ()) -> torch.Tensor:
    """Fraction of the goal lift achieved (clipped to [0, 1]) while the object is in hand.

    Rewarding height alone pays for flinging the object: a policy swatting it into the air collects
    the lift bonus for the whole flight. Counting only a lift in hand pays for carrying it.
    """
    progress = (object_height(env, body, event) / height).clamp(0.0, 1.0)
    return progress * object_in_hand(env, body, sensor, radius, touch_sensors).float()


def object_lifted(env, body: str, event: str, height: float, sensor: str, radius: float,
                  touch_sensors: tuple[str, ...] = ()) -> torch.Tensor:
    """True where the object is at least `height` above its resting height and in hand (the success of
    the lift tasks)."""
    return (object_height(env, body, event) >= height) & object_in_hand(env, body, sensor, radius, touch_sensors)


def object_pushed_to(env, body: str, goal: float, std: float, axis: int = 0) -> torch.Tensor:
    """`1 - tanh(shortfall / std)`, the shortfall of the object's centre behind `goal` along world axis `axis`
    (0: x, 1: y) [m] (0 once it is there): pays for pushing an object toward an edge."""
    shortfall = (goal - body_pos(env, body)[:, axis]).clamp(min=0.0)
    return 1.0 - torch.tanh(shortfall / std)


def tool_axis_aligned_near(env, quat_sensor: str, local_axis: tuple[float, float, float],
                           direction: tuple[float, float, float], body: str, sensor: str, std: float) -> torch.Tensor:
    """`|tool axis · direction| · (1 - tanh(distance / std))`: pays for turning a tool axis (`local_axis` in the
    tool frame, its orientation from `quat_sensor` in the world frame) along (or against) the world
    `direction` while the tool point is near the object [m], e.g. a gripper's finger axis vertical to pinch
    a flat object across its thickness."""
    quat = env.sim.sensor(quat_sensor)
    axis = quat_rotate(quat, torch.as_tensor(local_axis, dtype=quat.dtype, device=quat.device).expand(quat.shape[0], 3))
    alignment = (axis * torch.as_tensor(direction, dtype=quat.dtype, device=quat.device)).sum(dim=1).abs()
    return alignment * (1.0 - torch.tanh(ee_to_body(env, body, sensor).norm(dim=1) / std))


def object_below(env, body: str, z: float) -> torch.Tensor:
    """True where the object's centre is below `z` [m, world frame]: it fell off the table."""
    return body_pos(env, body)[:, 2] < z
