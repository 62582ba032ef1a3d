# SPDX-License-Identifier: BSD-3-Clause
"""Baton terms: the baton taken from its moving holder (in the hand, out of the cup), the holder followed, and the
success of both for the rest of the episode. Exact simulation state: the reward may know more than the policy sees."""

from __future__ import annotations

import torch

from batonlab.env.terms import ManagerTerm
from batonlab.observations.objects import body_pos
from batonlab.rewards.manipulation import object_in_hand


def holder_height(env, holder: str) -> torch.Tensor:
    """(num_envs,) the height of a mocap holder's origin [m, world]."""
    mocap_id = int(env.scene.model.body_mocapid[env.scene.body_id(holder)])
    return env.sim.mocap_pos[:, mocap_id, 2].to(env.device)


def baton_taken(env, baton: str, holder: str, ee_sensor: str, touch_sensors: tuple[str, ...], radius: float,
                lift: float) -> torch.Tensor:
    """True where the baton is in the hand (within `radius` [m] of the tool point, every pad touching it) and its
    centre at least `lift` [m] above the holder's origin (out of the cup)."""
    out = body_pos(env, baton)[:, 2] - holder_height(env, holder) > lift
    return out & object_in_hand(env, baton, ee_sensor, radius, touch_sensors)


def holder_distance(env, holder_sensor: str) -> torch.Tensor:
    """(num_envs,) horizontal distance from the robot to the holder [m] (a position sensor in a robot frame)."""
    return env.sim.sensor(holder_sensor)[:, :2].norm(dim=1)


def follow_holder(env, holder_sensor: str, distance: float, std: float, baton: str, holder: str, ee_sensor: str,
                  touch_sensors: tuple[str, ...], radius: float, lift: float) -> torch.Tensor:
    """`exp(-((d - distance) / std)²)` of the robot's distance d to the holder [m], while the baton is taken."""
    error = (holder_distance(env, holder_sensor) - distance) / std
    taken = baton_taken(env, baton, holder, ee_sensor, touch_sensors, radius, lift)
    return torch.exp(-error.square()) * taken.float()


class BatonTakenAndFollowed(ManagerTerm):
    """Success term: the baton was taken (`baton_taken`) at some step, and from then on stayed in the hand with the
    robot within `follow_range` [m] of the holder (dropping it or falling behind is a failure). A lapse no longer than
    `grace_s` [s] is forgiven: a pad's contact flickers as the baton shifts between the pads, as a grasp detector on
    the robot debounces it."""

    def __init__(self, env, baton: str, holder: str, holder_sensor: str, ee_sensor: str, touch_sensors: tuple[str, ...],
                 radius: float, lift: float, follow_range: tuple[float, float], grace_s: float = 0.2):
        self.taken_params = {"baton": baton, "holder": holder, "ee_sensor": ee_sensor, "touch_sensors": touch_sensors,
                             "radius": radius, "lift": lift}
        self.holder_sensor, self.follow_range, self.grace_s = holder_sensor, follow_range, grace_s
        self.lapse = torch.zeros(env.num_envs, device=env.device)
        """(num_envs,) how long the baton has been out of the hand or the holder out of range, since taken [s]."""
        self.taken = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        """(num_envs,) whether the baton has been taken in this episode."""
        self.lost = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        """(num_envs,) whether, since, it left the hand or the robot left the range."""

    def __call__(self, env) -> torch.Tensor:
        """(num_envs,) bool: taken, and carried and followed since (lapses up to `grace_s` forgiven)."""
        carried = baton_taken(env, **self.taken_params)
        distance = holder_distance(env, self.holder_sensor)
        following = (distance >= self.follow_range[0]) & (distance <= self.follow_range[1])
        lapsing = self.taken & ~(carried & following)
        self.lapse = torch.where(lapsing, self.lapse + env.step_dt, torch.zeros_like(self.lapse))
        self.lost |= self.lapse > self.grace_s + 1e-6
        self.taken |= carried
        return self.taken & ~self.lost

    def reset(self, env_ids: torch.Tensor) -> None:
        """A new episode has taken nothing."""
        self.taken[env_ids] = False
        self.lost[env_ids] = False
        self.lapse[env_ids] = 0.0
