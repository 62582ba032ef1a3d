# SPDX-License-Identifier: BSD-3-Clause
"""Event terms of a moving holder (a mocap body, e.g. the hand holding out a relay baton): a path drawn per episode,
and its motion along it at every control step."""

from __future__ import annotations

import torch

from batonlab.env.terms import ManagerTerm


class RandomizeHolderPath(ManagerTerm):
    """Reset event: place the holder, and the free object standing in it, and draw the path it will move along.

    The path starts `distance` ahead of the robot's nominal position, heads away from it within `heading_range` of
    straight ahead, at a constant speed, turning at a constant rate (an arc). `move_holder` moves it.

    Args:
        holder: The mocap body.
        body: The free body standing in it (placed `rest_height` above the holder's origin, upright), or None.
        origin: The robot's nominal position [m, world]; the path starts from `origin` + `distance` along +x.
        distance_range, lateral_range: Where the holder starts, ahead of and across from `origin` [m].
        height_range: The holder's height [m, world].
        heading_range: The path's initial heading, from +x [rad].
        speed_range: Its speed [m/s].
        turn_rate_range: Its turn rate [rad/s].
        rest_height: The free body's centre above the holder's origin [m].
    """

    def __init__(self, env, holder: str, body: str | None, distance_range: tuple[float, float],
                 lateral_range: tuple[float, float], height_range: tuple[float, float],
                 heading_range: tuple[float, float], speed_range: tuple[float, float],
                 turn_rate_range: tuple[float, float], rest_height: float = 0.0,
                 origin: tuple[float, float] = (0.0, 0.0)):
        self.mocap_id = int(env.scene.model.body_mocapid[env.scene.body_id(holder)])
        if self.mocap_id < 0:
            raise ValueError(f"RandomizeHolderPath: body '{holder}' is not a mocap body")
        self.body, self.rest_height, self.origin = body, rest_height, origin
        if body is not None:
            env.scene.free_body_adr(body)  # fail now on a body without a free joint
        self.ranges = dict(distance=distance_range, lateral=lateral_range, height=height_range, heading=heading_range,
                           speed=speed_range, turn_rate=turn_rate_range)
        n = env.num_envs
        self.heading = torch.zeros(n, device=env.device)
        """(num_envs,) the holder's current heading [rad, world]."""
        self.speed = torch.zeros(n, device=env.device)
        """(num_envs,) its speed [m/s]."""
        self.turn_rate = torch.zeros(n, device=env.device)
        """(num_envs,) its turn rate [rad/s]."""

    @property
    def velocity(self) -> torch.Tensor:
        """(num_envs, 3) the holder's velocity [m/s, world]."""
        return torch.stack([self.speed * torch.cos(self.heading), self.speed * torch.sin(self.heading),
                            torch.zeros_like(self.speed)], dim=1)

    def __call__(self, env, env_ids: torch.Tensor) -> None:
        n, r = len(env_ids), self.ranges
        start = torch.stack([self.origin[0] + env.uniform(n, *r["distance"]), self.origin[1] + env.uniform(n, *r["lateral"]),
                             env.uniform(n, *r["height"])], dim=1)
        self.heading[env_ids] = env.uniform(n, *r["heading"])
        self.speed[env_ids] = env.uniform(n, *r["speed"])
        self.turn_rate[env_ids] = env.uniform(n, *r["turn_rate"])
        env.sim.mocap_pos[env_ids.to(env.sim.mocap_pos.device), self.mocap_id] = start.to(env.sim.mocap_pos)
        if self.body is not None:
            qadr, _ = env.scene.free_body_adr(self.body)
            rows = env.reset_qpos[env_ids]
            rows[:, qadr : qadr + 3] = start
            rows[:, qadr + 2] += self.rest_height
            rows[:, qadr + 3 : qadr + 7] = torch.tensor([1.0, 0.0, 0.0, 0.0], device=rows.device)
            env.reset_qpos[env_ids] = rows

    def advance(self, env, env_ids: torch.Tensor, dt: float) -> None:
        """Move the holders of `env_ids` along their paths by `dt` [s]."""
        step = (self.velocity[env_ids] * dt).to(env.sim.mocap_pos)
        env.sim.mocap_pos[env_ids.to(env.sim.mocap_pos.device), self.mocap_id] += step
        self.heading[env_ids] += self.turn_rate[env_ids] * dt


def move_holder(env, env_ids: torch.Tensor, event: str) -> None:
    """Interval event (every control step: `interval_range_s=(0, 0)`): the holder of the `RandomizeHolderPath` event
    named `event` moves one control period along its path."""
    env.event_manager.terms[event].advance(env, env_ids, env.step_dt)
