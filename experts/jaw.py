# SPDX-License-Identifier: BSD-3-Clause
"""What the command-layer experts share about moving a parallel jaw: its orientation from an approach and a finger
axis, and a tool pose command that glides toward its goal (moving first, turning once near)."""

from __future__ import annotations

import torch

from batonlab.utils.quaternions import quat_angle_between, quat_canonical, quat_slerp


def jaw_rotation(approach: torch.Tensor, fingers: torch.Tensor) -> torch.Tensor:
    """(N, 3, 3) tool rotation: approach (tool z) against `approach` (N, 3), finger axis (tool y) along `fingers` (N, 3)."""
    z, y = -approach, fingers
    x = torch.linalg.cross(y, z, dim=1)
    return torch.stack([x, y, z], dim=2)


def glide(tool: torch.Tensor, target: torch.Tensor, here: torch.Tensor, goal: torch.Tensor, lead: float,
          max_turn: float, turn_near: float) -> tuple[torch.Tensor, torch.Tensor]:
    """The tool pose to command now, (N, 3) position [m] and (N, 4) quaternion: at most `lead` [m] ahead of `tool`
    toward `target`, and from `here` toward `goal` by at most `max_turn` [rad], falling to none at `turn_near` [m] from
    the target (a DLS step that must move and turn a folded arm at once can stall between the two)."""
    step = target - tool
    distance = step.norm(dim=1)
    position = tool + step * (lead / distance[:, None].clamp_min(lead))
    turn = quat_angle_between(here, goal)
    limit = max_turn * (1.0 - distance / turn_near).clamp(0.0, 1.0)
    return position, quat_canonical(quat_slerp(here, goal, (limit / turn.clamp_min(1e-6)).clamp(max=1.0)))
