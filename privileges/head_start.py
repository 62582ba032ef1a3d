# SPDX-License-Identifier: BSD-3-Clause
"""Privileged start states: the object starts part of the way through the task while λ is high.

A task that needs a long first phase before any reward (pushing a flat box over the table's edge before it
can be grasped) is learned backwards: at λ = 1 each episode starts with the first phase done (the box already
overhangs the edge), and as λ falls episodes start further back, until at λ = 0 they start where a robot
finds the object. The shift is applied when an env resets, after the reset events placed the object.
"""

from __future__ import annotations

import torch

from batonlab.env.terms import PrivilegeTerm


class HeadStart(PrivilegeTerm):
    """Shift a free object's reset position by λ · `shift` (world frame), its centre kept below `max_xy`.

    Args:
        body: The object (a free joint of the same name), placed by a reset event before this term runs.
        shift: (dx, dy) at λ = 1 [m].
        max_xy: The object's centre never starts beyond this (x, y) [m] (None: no bound on that axis), e.g. so
            that a box overhanging a table's edge keeps its centre of mass over the table.
    """

    def __init__(self, env, body: str, shift: tuple[float, float],
                 max_xy: tuple[float | None, float | None] = (None, None)):
        self.env = env
        self.qpos_adr, _ = env.scene.free_body_adr(body)
        self.shift = torch.tensor([float(v) for v in shift], device=env.device)
        self.max_xy = tuple(max_xy)

    def reset(self, env_ids: torch.Tensor) -> None:
        """Envs that reset start λ · shift further along (their reset pose is edited before the backend reset)."""
        level = self.env.privilege_manager.level
        if level <= 0.0 or len(env_ids) == 0:
            return
        rows = self.env.reset_qpos[env_ids]
        xy = rows[:, self.qpos_adr:self.qpos_adr + 2] + level * self.shift
        for axis, bound in enumerate(self.max_xy):
            if bound is not None:
                xy[:, axis] = xy[:, axis].clamp(max=bound)
        rows[:, self.qpos_adr:self.qpos_adr + 2] = xy
        self.env.reset_qpos[env_ids] = rows
