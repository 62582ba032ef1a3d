# SPDX-License-Identifier: BSD-3-Clause
"""`wl_baton`'s scripted expert: catch up with the moving holder, close the jaw on the baton from behind it, lift it
out of the cup, and follow the holder carrying it. It issues the command layer's actions (base speed and yaw rate,
tool pose) and the gripper's, in the arm base frame, from exact state and the holder's velocity.

Reactive, like `DoorOpenerExpert`: its phase is a function of what it sees now."""

from __future__ import annotations

import math

import torch

from batonlab.experts.jaw import CommandLayerExpert, glide, jaw_rotation
from batonlab.observations.objects import holder_velocity_heading
from batonlab.utils.quaternions import quat_angle_between, quat_from_matrix

APPROACH, ALIGN, SLIDE_IN, CLOSE, LIFT, CARRY = range(6)
"""The expert's phases (rules later in this list win where several hold)."""

READY_POINT = (0.3, 0.0, -0.05)
"""Where the tool waits while the base catches up [m, arm base frame]."""

CARRY_REACH = 0.35
"""The tool carries the baton this far ahead of the arm base, level [m]..."""

LEAD, MAX_TURN, TURN_NEAR = 0.1, 0.3, 0.3
"""How the tool command glides (`batonlab.experts.jaw.glide`) [m, rad, m]."""


class BatonTakerExpert(CommandLayerExpert):
    """Catch up, grasp, lift and follow; actions of a `WholeBodyCommandAction` term and a gripper term (+1 open, -1
    closed).

    Args:
        sensors: Arm-base-frame sensors: `tool` (tool point [m]), `tool_quat` (its orientation), `baton` (the baton's
            centre [m]), `holder` (the cup's floor [m]), `up` (the world's up direction).
        event: The `RandomizeHolderPath` event (the holder's velocity, feed-forward for the base).
        reach_x: The base holds the baton this far ahead of the arm base while taking it [m].
        follow_distance: ... and the holder this far once it carries the baton [m].
        standoff: The tool lines up this far behind the baton before sliding onto it [m].
        depth: The tool point goes this far past the baton's axis [m].
        tilt: The jaw's approach, tilted up from the horizontal [rad] (0: from straight behind).
        lift: The baton's centre this high above the cup's floor is clear of the cup's walls [m]: the tool lifts it 3 cm
            higher and carries it there, and starts carrying it away once it is 3 cm under it (a baton sags in the
            jaw; pulled back as soon as it clears the walls, it was dragged over their edge).
        commands, gripper: The action terms.
    """

    def __init__(self, env, sensors: dict[str, str], event: str = "holder", reach_x: float = 0.42,
                 follow_distance: float = 0.6, standoff: float = 0.08, depth: float = 0.01, tilt: float = 0.0,
                 lift: float = 0.2, commands="commands", gripper: str = "gripper"):
        super().__init__(env, sensors, commands, gripper)
        self.event = event
        env.event_manager.terms[event].velocity  # noqa: B018 (fail now on a wrong event)
        self.reach_x, self.follow_distance, self.standoff, self.depth = reach_x, follow_distance, standoff, depth
        self.tilt, self.lift = tilt, lift

    def __call__(self, env) -> torch.Tensor:
        """(num_envs, num_actions) the expert's actions for the current state."""
        baton, holder, tool = self.read("baton"), self.read("holder"), self.read("tool")
        opening = self.opening()
        holder_velocity = holder_velocity_heading(env, self.event)

        # The jaw comes from behind the baton (from the arm base's side), fingers across it, level: in the world's
        # frame, not the arm base's (the torso leans).
        up = self.read("up")
        behind = -(baton - (baton * up).sum(1, keepdim=True) * up)
        behind = behind / behind.norm(dim=1, keepdim=True).clamp_min(1e-6)
        approach = math.cos(self.tilt) * behind + math.sin(self.tilt) * up
        fingers = torch.linalg.cross(up, behind, dim=1)
        goal = quat_from_matrix(jaw_rotation(approach, fingers))
        here = self.read("tool_quat")
        turn = quat_angle_between(here, goal)
        grasp = baton - self.depth * approach
        offset = tool - grasp
        along = (offset * approach).sum(1)  # > 0: the tool is on the approach side of the grasp point
        across = (offset - along[:, None] * approach).norm(dim=1)
        near = offset.norm(dim=1)
        in_reach = baton[:, 0] < self.reach_x + 0.05
        lined_up = in_reach & (across < 0.03) & (along > -0.01)
        at_baton = in_reach & (across < 0.015) & (along.abs() < 0.015) & (turn < 0.2)
        closing = (near < 0.04) & (opening > 0.002) & (opening < 0.035)
        gripping = (opening > 0.002) & (opening < 0.016) & (near < 0.06)
        raised = self.lift + 0.03  # the tool lifts the baton's centre this high above the cup's floor [m]
        out = ((baton - holder) * up).sum(1) > self.lift - 0.03

        phase = torch.full_like(self.phase, APPROACH)
        phase[baton[:, 0] < self.reach_x + 0.15] = ALIGN
        phase[lined_up] = SLIDE_IN
        phase[at_baton | closing] = CLOSE
        phase[(opening < 0.002) & (phase >= SLIDE_IN)] = ALIGN  # closed on nothing: open and line up again
        phase[gripping] = LIFT
        phase[gripping & out] = CARRY
        self.phase[:] = phase

        ready = torch.tensor(READY_POINT, device=env.device).expand_as(baton)
        target = torch.where((phase == APPROACH)[:, None], ready, grasp + self.standoff * approach)
        target = torch.where((phase >= SLIDE_IN)[:, None], grasp, target)
        rise = ((holder - baton) * up).sum(1, keepdim=True) + raised  # still to lift it by, along up [m]
        target = torch.where((phase == LIFT)[:, None], grasp + rise * up, target)
        # ... and carried at that height, `CARRY_REACH` ahead.
        level = torch.zeros_like(baton)
        level[:, 0] = 1.0
        level = level - up[:, :1] * up
        level = level / level.norm(dim=1, keepdim=True)
        carry = CARRY_REACH * level + ((holder * up).sum(1, keepdim=True) + raised) * up
        target = torch.where((phase == CARRY)[:, None], carry, target)
        target, quat = glide(tool, target, here, goal, LEAD, MAX_TURN, TURN_NEAR)

        # The base: the holder's own speed, plus closing on the baton (or, carrying it, on the follow distance); it
        # faces the baton (or the holder).
        carrying = phase == CARRY
        gap = torch.where(carrying, holder[:, 0] - self.follow_distance, baton[:, 0] - self.reach_x)
        speed = (holder_velocity[:, 0] + 1.0 * gap).clamp(-0.3, 0.9)
        aim = torch.where(carrying[:, None], holder[:, :2], baton[:, :2])
        bearing = torch.atan2(aim[:, 1], aim[:, 0].clamp_min(0.1))
        yaw_rate = (1.5 * bearing).clamp(-0.8, 0.8)
        return self.actions(speed, yaw_rate, target, quat, phase >= CLOSE)
