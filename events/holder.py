# SPDX-License-Identifier: BSD-3-Clause
"""Event terms of a moving holder (a mocap body, e.g. the hand holding out a relay baton): a path drawn per episode,
and its motion along it at every control step."""

from __future__ import annotations

import torch

from batonlab.env.terms import ManagerTerm


class RandomizeHolderPath(ManagerTerm):
    """Reset event: place the holder, and the free object standing in it, and draw the path it will move along.

    The path starts `distance` from the robot's nominal position along a bearing drawn from `bearing_range` (0:
    ahead), heads within `heading_range` of that bearing, speeds up from rest to a constant speed, and turns at a
    constant rate (an arc; `redraw_holder_turn` makes it swerve). `move_holder` moves it.

    Args:
        holder: The mocap body.
        body: The free body standing in it (placed `rest_height` above the holder's origin, upright), or None.
        origin: The robot's nominal position [m, world].
        distance_range, lateral_range: Where the holder starts, along the bearing from `origin` and across it [m].
        height_range: The holder's height [m, world].
        heading_range: The path's initial heading, from the bearing [rad] (0: straight away from the robot).
        speed_range: Its speed [m/s].
        turn_rate_range: Its turn rate [rad/s].
        rest_height: The free body's centre above the holder's origin [m].
        bearing_range: The direction of the start from `origin`, from +x [rad].
        acceleration: How fast it reaches its speed from rest [m/s²] (a cup that starts at full speed knocks the
            object standing in it over).
    """

    def __init__(self, env, holder: str, body: str | None, distance_range: tuple[float, float],
                 lateral_range: tuple[float, float], height_range: tuple[float, float],
                 heading_range: tuple[float, float], speed_range: tuple[float, float],
                 turn_rate_range: tuple[float, float], rest_height: float = 0.0,
                 origin: tuple[float, float] = (0.0, 0.0), bearing_range: tuple[float, float] = (0.0, 0.0),
                 acceleration: float = 0.5):
        self.mocap_id = int(env.scene.model.body_mocapid[env.scene.body_id(holder)])
        if self.mocap_id < 0:
            raise ValueError(f"RandomizeHolderPath: body '{holder}' is not a mocap body")
        self.body, self.rest_height, self.origin = body, rest_height, origin
        if body is not None:
            env.scene.free_body_adr(body)  # fail now on a body without a free joint
        self.ranges = dict(distance=distance_range, lateral=lateral_range, height=height_range, heading=heading_range,
                           speed=speed_range, turn_rate=turn_rate_range, bearing=bearing_range)
        n = env.num_envs
        self.heading = torch.zeros(n, device=env.device)
        """(num_envs,) the holder's current heading [rad, world]."""
        self.acceleration = acceleration
        self.cruise_speed = torch.zeros(n, device=env.device)
        """(num_envs,) the speed it speeds up to [m/s]."""
        self.speed = torch.zeros(n, device=env.device)
        """(num_envs,) its speed now [m/s]."""
        self.turn_rate = torch.zeros(n, device=env.device)
        """(num_envs,) its turn rate [rad/s]."""

    @property
    def velocity(self) -> torch.Tensor:
        """(num_envs, 3) the holder's velocity [m/s, world]."""
        return torch.stack([self.speed * torch.cos(self.heading), self.speed * torch.sin(self.heading),
                            torch.zeros_like(self.speed)], dim=1)

    def __call__(self, env, env_ids: torch.Tensor) -> None:
        n, r = len(env_ids), self.ranges
        bearing = env.uniform(n, *r["bearing"])
        distance, lateral = env.uniform(n, *r["distance"]), env.uniform(n, *r["lateral"])
        cos, sin = torch.cos(bearing), torch.sin(bearing)
        start = torch.stack([self.origin[0] + distance * cos - lateral * sin,
                             self.origin[1] + distance * sin + lateral * cos, env.uniform(n, *r["height"])], dim=1)
        self.heading[env_ids] = bearing + env.uniform(n, *r["heading"])
        self.cruise_speed[env_ids] = env.uniform(n, *r["speed"])
        self.speed[env_ids] = 0.0
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
        self.speed[env_ids] = torch.minimum(self.speed[env_ids] + self.acceleration * dt, self.cruise_speed[env_ids])
        step = (self.velocity[env_ids] * dt).to(env.sim.mocap_pos)
        env.sim.mocap_pos[env_ids.to(env.sim.mocap_pos.device), self.mocap_id] += step
        self.heading[env_ids] += self.turn_rate[env_ids] * dt


    def redraw_turn(self, env, env_ids: torch.Tensor, turn_rate_range: tuple[float, float]) -> None:
        """New turn rates for the holders of `env_ids`, drawn from `turn_rate_range` [rad/s]."""
        self.turn_rate[env_ids] = env.uniform(len(env_ids), *turn_rate_range)


def move_holder(env, env_ids: torch.Tensor, event: str) -> None:
    """Interval event (every control step: `interval_range_s=(0, 0)`): the holder of the `RandomizeHolderPath` event
    named `event` moves one control period along its path."""
    env.event_manager.terms[event].advance(env, env_ids, env.step_dt)


def redraw_holder_turn(env, env_ids: torch.Tensor, event: str, turn_rate_range: tuple[float, float]) -> None:
    """Interval event: the holder of the `RandomizeHolderPath` event named `event` swerves (a new turn rate [rad/s])."""
    env.event_manager.terms[event].redraw_turn(env, env_ids, turn_rate_range)
