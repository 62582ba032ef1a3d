# SPDX-License-Identifier: BSD-3-Clause
"""`wl_door`'s scripted expert: drive to the door, take the lever from above its front, press it down, pull the door open
along its arc while the base backs away. It issues the command layer's actions (base speed and yaw rate, tool pose)
and the gripper's, all in the arm base frame, from exact door state.

Reactive, like `arm_push_grasp`'s expert: its phase is a function of what it sees now (tool, handle, door and lever
angles, finger opening), never of its own past, so a student that sees the same state gets the same label."""

from __future__ import annotations

import math

import torch

from batonlab.experts.jaw import CommandLayerExpert, glide, jaw_rotation
from batonlab.utils.quaternions import quat_angle_between, quat_from_matrix

DRIVE, ALIGN, SLIDE_IN, CLOSE, PRESS, PULL = range(6)
"""The expert's phases (rules later in this list win where several hold)."""

READY_POINT = (0.3, 0.0, -0.05)
"""Where the tool waits while the base drives to the door [m, arm base frame]."""

LEAD = 0.1
"""The commanded tool point leads the measured one by at most this much [m] (commands glide, as in training)."""

PULL_LEAD = 0.1
"""While pulling, the tool is commanded this far ahead of the lever along the door's arc [rad of door angle]."""

PULL_STANDBACK = 0.08
"""While pulling, the base holds the handle this much farther than `reach_x` [m]."""

MAX_TURN = 0.3
"""The commanded tool orientation leads the measured one by at most this angle [rad]..."""

TURN_NEAR = 0.3
"""... falling to none at this distance of the tool from its target [m]."""


class DoorOpenerExpert(CommandLayerExpert):
    """Approach, grasp, press and pull; actions of a `WholeBodyCommandAction` term and a gripper term (+1 open, -1 closed).

    Args:
        sensors: Arm-base-frame sensors: `tool` (tool point [m]), `tool_quat` (its orientation), `handle` (grasp
            point [m]), `normal` (panel front normal), `lever` (lever direction), `hinge` (a point on the hinge axis
            [m]), `axis` (the hinge's opening axis), `door_angle`, `handle_angle` [rad].
        reach_x: The base holds the handle this far ahead of the arm base [m].
        standoff: The tool lines up this far back from the lever, along the approach, before sliding onto it [m].
        depth: The tool point goes this far past the lever along the approach, so that the pads hold it deep [m].
        tilt: The jaw's approach, tilted up from the panel's normal [rad]: 0 comes from the room into the panel, the
            fingers above and below the lever (a pull slides the lever out of the jaw's mouth: friction alone holds
            it); π/2 comes down onto the lever, the fingers in front of and behind it (the front one hooks it).
        release_angle: The lever is pressed until it passes this angle (the latch clears at ~0.5 rad) [rad].
        hold_angle: The door is pulled to this angle and held there [rad].
        commands, gripper: The action terms.
    """

    def __init__(self, env, sensors: dict[str, str], reach_x: float = 0.42, standoff: float = 0.08, depth: float = 0.025,
                 release_angle: float = 0.6, hold_angle: float = 1.25, commands="commands",
                 gripper: str = "gripper", tilt: float = 0.9):
        super().__init__(env, sensors, commands, gripper)
        self.reach_x, self.standoff, self.release_angle, self.hold_angle = reach_x, standoff, release_angle, hold_angle
        self.depth, self.tilt = depth, tilt

    def approach(self, normal: torch.Tensor, lever: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """((num_envs, 3) the direction the tool comes from, toward the lever; (num_envs, 3) the finger axis)."""
        up = torch.linalg.cross(lever, normal, dim=1)
        up = torch.where((up[:, 2:] < 0), -up, up)  # across the lever and the normal, upward
        up = up / up.norm(dim=1, keepdim=True).clamp_min(1e-6)
        cos, sin = math.cos(self.tilt), math.sin(self.tilt)
        return cos * normal + sin * up, cos * up - sin * normal

    def __call__(self, env) -> torch.Tensor:
        """(num_envs, num_actions) the expert's actions for the current state."""
        handle, normal, lever = self.read("handle"), self.read("normal"), self.read("lever")
        hinge, axis = self.read("hinge"), self.read("axis")
        door_angle, handle_angle = self.read("door_angle")[:, 0], self.read("handle_angle")[:, 0]
        tool = self.read("tool")
        opening = self.opening()

        approach, fingers = self.approach(normal, lever)
        goal = quat_from_matrix(jaw_rotation(approach, fingers))
        here = self.read("tool_quat")
        turn = quat_angle_between(here, goal)
        grasp = handle - self.depth * approach  # the lever sits this deep between the pads, not at their tips
        offset = tool - grasp
        along = (offset * approach).sum(1)  # > 0: the tool is on the approach side of the grasp point
        across = (offset - along[:, None] * approach).norm(dim=1)
        near = offset.norm(dim=1)
        in_reach = handle[:, 0] < self.reach_x + 0.05
        lined_up = in_reach & (across < 0.04) & (along > -0.01)
        at_lever = in_reach & (across < 0.012) & (along.abs() < 0.015) & (turn < 0.15)  # the jaw across the lever
        closing = (near < 0.04) & (opening > 0.002) & (opening < 0.035)  # the fingers are on their way: keep closing
        # Closed on something, and it is the lever: the tool is at it, or the lever is held down against its spring.
        gripping = (opening > 0.002) & (opening < 0.017) & ((near < 0.08) | (handle_angle > 0.3))

        phase = torch.full_like(self.phase, DRIVE)
        phase[handle[:, 0] < self.reach_x + 0.15] = ALIGN
        phase[lined_up] = SLIDE_IN
        phase[at_lever | closing] = CLOSE
        phase[(opening < 0.002) & (phase >= SLIDE_IN)] = ALIGN  # closed on nothing (or a finger under the lever): back off
        phase[gripping] = PRESS
        phase[gripping & ((handle_angle > self.release_angle) | (door_angle > 0.05))] = PULL
        self.phase[:] = phase

        # The tool: held ready while driving, in front of the lever, around it, pressing it down, or a little ahead
        # of it along the door's arc.
        ready = torch.tensor(READY_POINT, device=env.device).expand_as(handle)
        target = torch.where((phase == DRIVE)[:, None], ready, grasp + self.standoff * approach)
        target = torch.where((phase >= SLIDE_IN)[:, None], grasp, target)
        press = torch.zeros_like(handle)
        press[:, 2] = -0.025
        target = torch.where((phase == PRESS)[:, None], grasp + press, target)
        ahead = (self.hold_angle - door_angle).clamp(0.0, PULL_LEAD)  # along the arc, then hold the door there
        pressing = (door_angle < 0.15) & (handle_angle < self.release_angle + 0.1)  # keep the latch open, no harder
        swing = self._turn(handle - hinge, axis, ahead) + hinge + press * pressing[:, None]  # from where the lever is
        target = torch.where((phase == PULL)[:, None], swing, target)
        target, quat = glide(tool, target, here, goal, LEAD, MAX_TURN, TURN_NEAR)

        # The base: keep the handle at reach (backing away as the door comes), face it until the grasp.
        # While pulling, the base keeps the handle farther (the opening panel sweeps toward its legs) and backs faster.
        pulling = phase == PULL
        reach = torch.where(pulling, self.reach_x + PULL_STANDBACK, torch.full_like(door_angle, self.reach_x))
        gain = torch.where(pulling, 1.5, 0.8)
        speed = (gain * (handle[:, 0] - reach)).clamp(-0.25, 0.2) * ((phase < CLOSE) | pulling)
        bearing = torch.atan2(handle[:, 1], handle[:, 0].clamp_min(0.1))
        yaw_rate = (1.5 * bearing).clamp(-0.5, 0.5) * ((phase < SLIDE_IN) | (phase == PULL))
        return self.actions(speed, yaw_rate, target, quat, phase >= CLOSE)

    @staticmethod
    def _turn(vectors: torch.Tensor, axis: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
        """`vectors` (N, 3) turned by `angle` (N,) [rad] about the unit `axis` (N, 3) (Rodrigues)."""
        cos, sin = torch.cos(angle)[:, None], torch.sin(angle)[:, None]
        dot = (axis * vectors).sum(1, keepdim=True)
        return vectors * cos + torch.linalg.cross(axis, vectors, dim=1) * sin + axis * dot * (1 - cos)
