# SPDX-License-Identifier: BSD-3-Clause
"""`arm_push_grasp`'s scripted expert: push the flat box sideways until it overhangs the table's edge, then pinch
the overhanging strip across its thickness from the front and lift it (arm6, the world frame = the arm's base)."""

from __future__ import annotations

import torch

from batonlab.env.terms import ExpertTerm
from batonlab.experts.arm_servo import ArmPoseServo
from batonlab.observations.objects import body_pos, body_quat
from batonlab.robots.arm6 import ARM_JOINTS, EE_SITE
from batonlab.utils.quaternions import yaw_from_quat

ABOVE_PUSH, AT_PUSH, PUSH, CLEAR, ABOVE_BEHIND, BEHIND, SLIDE_IN, CLOSE, LIFT = range(9)
"""The expert's phases, in order; each env moves on when its waypoint (or the push goal) is reached."""

POINT_DOWN = ((1.0, 0.0, 0.0), (0.0, -1.0, 0.0), (0.0, 0.0, -1.0))
"""Tool rotation for the push (rows of the matrix): approach (tool z) down, fingers along the world y."""
POINT_FORWARD = ((0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
"""Tool rotation for the pinch: approach along the world x, the finger axis (tool y) vertical."""


class PushGraspExpert(ExpertTerm):
    """Push, then pinch and lift; arm actions from `ArmPoseServo`, the gripper +1 (open) or -1 (closed).

    Args:
        body: The box.
        half_size: Its nominal half sizes [m] (x, y, z).
        edge_y: The table's edge the box is pushed over [m, world y].
        push_to: The push stops once the box's centre is here [m, world y].
        pinch_beyond: The pads pinch at least this far beyond the edge [m] (the palm clears the table).
        pinch_depth: The tool point pinches this far in from the box's near end [m, x].
        arm, gripper: The action terms; the arm's chain is arm6's (`arm_base` to the `ee` site).
    """

    def __init__(self, env, body: str = "object", half_size: tuple[float, float, float] = (0.12, 0.08, 0.02),
                 edge_y: float = 0.2, push_to: float = 0.18, pinch_beyond: float = 0.045, pinch_depth: float = 0.06,
                 arm: str = "arm", gripper: str = "gripper"):
        self.env, self.body = env, body
        self.half_size = half_size
        self.edge_y, self.push_to, self.pinch_beyond, self.pinch_depth = edge_y, push_to, pinch_beyond, pinch_depth
        self.servo = ArmPoseServo(env, arm, "arm_base", EE_SITE, ARM_JOINTS)
        self.arm_slice = env.action_manager.term_slice(arm)
        self.gripper_slice = env.action_manager.term_slice(gripper)
        self.phase = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
        self.closing_time = torch.zeros(env.num_envs, device=env.device)
        self.down = torch.tensor(POINT_DOWN, device=env.device)
        self.forward = torch.tensor(POINT_FORWARD, device=env.device)

    def reset(self, env_ids: torch.Tensor) -> None:
        self.phase[env_ids] = ABOVE_PUSH
        self.closing_time[env_ids] = 0.0

    def __call__(self, env) -> torch.Tensor:
        tip, _ = self.servo.tool_pose()
        box = body_pos(env, self.body)
        waypoints = self._waypoints(box, yaw_from_quat(body_quat(env, self.body)))
        rows = torch.arange(env.num_envs, device=env.device)
        error = waypoints[rows, self.phase] - tip
        self._advance(error, box, tip, waypoints[:, PUSH])
        target = waypoints[rows, self.phase]
        rotation = torch.where((self.phase <= CLEAR).view(-1, 1, 1), self.down, self.forward)
        push_speed = (0.2 * (self.push_to - box[:, 1])).clamp(0.0015, 0.006)  # slow down before the goal
        speed = torch.where(self.phase == PUSH, push_speed, torch.where(self.phase == SLIDE_IN, 0.008, 0.025))
        actions = torch.zeros(env.num_envs, env.num_actions, device=env.device)
        actions[:, self.arm_slice] = self.servo.actions(target, rotation, speed)
        grip_open = (self.phase >= ABOVE_BEHIND) & (self.phase <= SLIDE_IN)
        actions[:, self.gripper_slice] = torch.where(grip_open, 1.0, -1.0).unsqueeze(1)
        return actions

    def _waypoints(self, box: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
        """(num_envs, 9, 3) the tool point's waypoint of each phase [m, world]."""
        hx, hy, _ = self.half_size
        extent_x = hx * yaw.cos().abs() + hy * yaw.sin().abs()
        extent_y = hx * yaw.sin().abs() + hy * yaw.cos().abs()
        low = torch.full_like(yaw, 0.03)
        push_x = box[:, 0] - (0.2 * yaw).clamp(-0.08, 0.08)  # off centre, against the box's turn
        at_push = torch.stack([push_x, box[:, 1] - extent_y - 0.04, low], 1)
        push = torch.stack([push_x, box[:, 1] - extent_y + 0.03, low], 1)
        pinch_y = (box[:, 1] + extent_y - 0.015).clamp(min=self.edge_y + self.pinch_beyond)
        pinch = torch.stack([box[:, 0] - extent_x + self.pinch_depth, pinch_y, box[:, 2] + 0.005], 1)
        behind = pinch - pinch.new_tensor([0.12, 0.0, 0.0])
        lifted = torch.stack([pinch[:, 0], pinch[:, 1], torch.full_like(yaw, 0.2)], 1)
        up = box.new_tensor([0.0, 0.0, 0.12])
        return torch.stack([at_push + up, at_push, push, push + box.new_tensor([0.0, -0.03, 0.1]),
                            behind + box.new_tensor([0.0, 0.0, 0.2]), behind, pinch, pinch, lifted], 1)

    def _advance(self, error: torch.Tensor, box: torch.Tensor, tip: torch.Tensor, push: torch.Tensor) -> None:
        """Each env's next phase: a waypoint reached within its tolerance, the push goal met, or a failure seen."""
        phase, distance = self.phase, error.norm(dim=1)
        reached = {ABOVE_PUSH: distance < 0.03, AT_PUSH: distance < 0.02, PUSH: box[:, 1] >= self.push_to,
                   CLEAR: distance < 0.03, ABOVE_BEHIND: distance < 0.04,
                   BEHIND: (distance < 0.015) & (error[:, 2].abs() < 0.005), SLIDE_IN: distance < 0.015}
        self.closing_time = torch.where(phase == CLOSE, self.closing_time + self.env.step_dt, 0.0)
        reached[CLOSE] = self.closing_time > 0.4
        following = phase.clone()
        for current, done in reached.items():
            following = torch.where((phase == current) & done, current + 1, following)
        lost_contact = (phase == PUSH) & ((tip - push).norm(dim=1) > 0.1)
        dropped = (following == LIFT) & (box[:, 2] < 0.03) & (tip[:, 2] > box[:, 2] + 0.06)
        self.phase = torch.where(lost_contact | dropped, ABOVE_PUSH, following)

