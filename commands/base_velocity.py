# SPDX-License-Identifier: BSD-3-Clause
"""Command term of a mobile base: forward speed, yaw rate and base height."""

from __future__ import annotations

import torch

from batonlab.env.cfg import CommandTermCfg
from batonlab.env.commands import CommandTerm
from batonlab.observations.root_state import root_lin_vel_heading


class BaseVelocityCommand(CommandTerm):
    """Forward speed, yaw rate and base height for a wheeled or legged base, uniform in `ranges`.

    command[:, 0]: forward velocity in the heading frame [m/s]; command[:, 1]: yaw rate [rad/s];
    command[:, 2]: base height [m]. A `standing_fraction` of the resampled envs get zero velocity.
    Its default (a robot without an operator) is standing still at `default_height` (None: the
    middle of `height_range`).

    `ranges` is the live sampling range (curricula widen it). `metrics` accumulate over the episode
    (reset with the command): `distance_commanded` = ∫|v_cmd| dt, `distance_traveled` = ∫ v·sign(v_cmd) dt
    along the heading [m], `lin_vel_error` = ∫|v − v_cmd| dt [m], `time` [s].
    """

    dim = 3
    fields = ("lin_vel_x", "ang_vel_z", "height")

    def __init__(
        self,
        env,
        cfg: CommandTermCfg,
        lin_vel_x_range: tuple[float, float],
        ang_vel_z_range: tuple[float, float],
        height_range: tuple[float, float],
        standing_fraction: float = 0.0,
        default_height: float | None = None,
        joint: str = "root",
    ):
        super().__init__(env, cfg)
        self.joint = joint
        self.default_height = float(default_height if default_height is not None else sum(height_range) / 2)
        self.standing_fraction = standing_fraction
        self.ranges = {
            "lin_vel_x": tuple(lin_vel_x_range),
            "ang_vel_z": tuple(ang_vel_z_range),
            "height": tuple(height_range),
        }
        metrics = ("distance_commanded", "distance_traveled", "lin_vel_error", "time")
        self.metrics = {k: torch.zeros(env.num_envs, device=env.device) for k in metrics}

    def sample(self, n: int) -> torch.Tensor:
        """(n, 3) commands uniform in `ranges` [m/s, rad/s, m], zero velocity for a `standing_fraction` of them."""
        cmd = torch.stack([self.env.uniform(n, *self.ranges[k]) for k in ("lin_vel_x", "ang_vel_z", "height")], dim=-1)
        standing = self.env.uniform(n, 0.0, 1.0) < self.standing_fraction
        cmd[standing, :2] = 0.0
        return cmd

    def default_value(self) -> tuple[float, ...]:
        """Standing still at `default_height`: (0 m/s, 0 rad/s, default_height [m])."""
        return (0.0, 0.0, self.default_height)

    def update(self, dt: float) -> None:
        """Accumulate the episode metrics over `dt` [s], then advance the timers and resample those that ran out."""
        vx = root_lin_vel_heading(self.env, self.joint)[:, 0]
        cmd_vx = self.command[:, 0]
        self.metrics["distance_commanded"] += cmd_vx.abs() * dt
        self.metrics["distance_traveled"] += vx * torch.sign(cmd_vx) * dt
        self.metrics["lin_vel_error"] += (vx - cmd_vx).abs() * dt
        self.metrics["time"] += dt
        super().update(dt)

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        """Zero the metrics of the envs that reset and draw their fresh commands and timers."""
        for value in self.metrics.values():
            value[env_ids] = 0.0
        return super().reset(env_ids)
