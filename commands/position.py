# SPDX-License-Identifier: BSD-3-Clause
"""Command terms of a target point: the base of point commands and one drawn uniformly in a box of the base frame."""

from __future__ import annotations

import torch

from batonlab.env.cfg import CommandTermCfg
from batonlab.env.commands import CommandTerm


class PositionCommand(CommandTerm):
    """Base of commands that are a target point (x, y, z) [m] in a frame the subclass names."""

    dim = 3
    fields = ("x", "y", "z")


class UniformPositionCommand(PositionCommand):
    """A target position in the robot's base frame, uniform in a box [m].

    Params:
        x_range, y_range, z_range: bounds of the box in the base frame [m].
        marker_mocap: optional name of a mocap body moved to the target (videos only).
        base_offset_w: position of the base frame in the world, to place the marker [m].
    """

    def __init__(
        self,
        env,
        cfg: CommandTermCfg,
        x_range: tuple[float, float],
        y_range: tuple[float, float],
        z_range: tuple[float, float],
        marker_mocap: str | None = None,
        base_offset_w: tuple[float, float, float] = (0.0, 0.0, 0.0),
    ):
        super().__init__(env, cfg)
        self.low = torch.tensor([x_range[0], y_range[0], z_range[0]], device=env.device)
        self.high = torch.tensor([x_range[1], y_range[1], z_range[1]], device=env.device)
        self.base_offset_w = torch.tensor(base_offset_w, device=env.device)
        self.mocap_id = self.marker_id(marker_mocap)

    def sample(self, n: int) -> torch.Tensor:
        """(n, 3) targets uniform in the box of the base frame [m]."""
        return self.low + (self.high - self.low) * self.env.uniform((n, 3), 0.0, 1.0)

    def _resample(self, env_ids: torch.Tensor) -> None:
        super()._resample(env_ids)
        if self.mocap_id is not None:
            self.env.sim.mocap_pos[env_ids, self.mocap_id] = (self.command[env_ids] + self.base_offset_w).to(
                self.env.sim.mocap_pos.device
            )
