# SPDX-License-Identifier: BSD-3-Clause
"""`arm_push_grasp`'s scripted expert: push the flat box sideways until it overhangs the table's edge, then pinch
the overhanging strip across its thickness from the front and lift it (arm6, the world frame = the arm's base).

The expert is reactive: its phase is a function of what it sees now (tool, box, finger opening), never of its
own past, so a student that sees the same state gets the same label (a phase kept in memory gives two labels to
one observation, and a student imitating both averages them into standing still: docs/PRIVILEGES.md)."""

from __future__ import annotations

import torch

from batonlab.env.terms import ExpertTerm
from batonlab.experts.arm_servo import ArmPoseServo
from batonlab.observations.objects import body_pos, body_quat
from batonlab.robots.arm6 import ARM_JOINTS, EE_SITE, GRIPPER_JOINT
from batonlab.utils.quaternions import yaw_from_quat

ABOVE_PUSH, AT_PUSH, PUSH, RISE, ABOVE_BEHIND, BEHIND, SLIDE_IN, CLOSE, LIFT = range(9)
"""The expert's phases (rules later in this list win where several hold)."""

POINT_DOWN = ((1.0, 0.0, 0.0), (0.0, -1.0, 0.0), (0.0, 0.0, -1.0))
"""Tool rotation for the push (rows of the matrix): approach (tool z) down, fingers along the world y."""
POINT_FORWARD = ((0.0, 0.0, 1.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0))
"""Tool rotation for the pinch: approach along the world x, the finger axis (tool y) vertical."""

TRAVEL_SPEED, SLIDE_SPEED = 0.025, 0.008
"""The commanded tool point's speed [m per control step] in free space and sliding the fingers around the box."""


class PushGraspExpert(ExpertTerm):
    """Push, then pinch and lift; arm actions from `ArmPoseServo`, the gripper +1 (open) or -1 (closed).

    Args:
        body: The box.
        half_size: Its nominal half sizes [m] (x, y, z).
        edge_y: The table's edge the box is pushed over [m, world y].
        push_to: The push stops once the box's centre is here [m, world y].
        pinch_beyond: The pads pinch at least this far beyond the edge [m] (the palm clears the table).
        pinch_depth: The tool point pinches this far in from the box's near end [m, x].
        in_hand_radius: A lifted box this close to the tool point [m] is still held (tilted in the grip).
        arm, gripper: The action terms; the arm's chain is arm6's (`arm_base` to the `ee` site).
    """

    def __init__(self, env, body: str = "object", half_size: tuple[float, float, float] = (0.12, 0.08, 0.02),
                 edge_y: float = 0.2, push_to: float = 0.18, pinch_beyond: float = 0.045, pinch_depth: float = 0.06,
                 in_hand_radius: float = 0.15, arm: str = "arm", gripper: str = "gripper"):
        self.env, self.body = env, body
        self.in_hand_radius = in_hand_radius
        self.half_size = half_size
        self.edge_y, self.push_to, self.pinch_beyond, self.pinch_depth = edge_y, push_to, pinch_beyond, pinch_depth
        self.servo = ArmPoseServo(env, arm, "arm_base", EE_SITE, ARM_JOINTS)
        self.arm_slice = env.action_manager.term_slice(arm)
        self.gripper_slice = env.action_manager.term_slice(gripper)
        self.finger_adr = env.scene.qpos_adr([GRIPPER_JOINT]).to(env.device)
        self.finger_dof = env.scene.dof_adr([GRIPPER_JOINT]).to(env.device)
        self.phase = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
        """(num_envs,) the phase of the last call, for inspection."""
        self.down = torch.tensor(POINT_DOWN, device=env.device)
        self.forward = torch.tensor(POINT_FORWARD, device=env.device)

    def __call__(self, env) -> torch.Tensor:
        tip, rot = self.servo.tool_pose()
        box = body_pos(env, self.body)
        finger = env.sim.qpos[:, self.finger_adr].squeeze(1)
        finger_speed = env.sim.qvel[:, self.finger_dof].squeeze(1)
        # At the edge, or lifted, or nearly there with the tool already on the edge's side (pinching tugs it back).
        lifted = box[:, 2] > 2 * self.half_size[2] + 0.01
        pushed = (box[:, 1] >= self.push_to) | lifted | ((box[:, 1] >= self.push_to - 0.03) & (tip[:, 1] > box[:, 1]))
        waypoints = self._waypoints(box, yaw_from_quat(body_quat(env, self.body)), tip, pushed)
        self.phase = self._phase(tip, box, finger, finger_speed, waypoints, pushed, lifted)
        target = waypoints[torch.arange(env.num_envs, device=env.device), self.phase]
        pushing = self.phase <= PUSH
        rotation = torch.where(pushing.view(-1, 1, 1), self.down, self.forward)
        rotation = torch.where((self.phase == RISE).view(-1, 1, 1), rot, rotation)  # no turning close to the box
        push_speed = (0.2 * (self.push_to - box[:, 1])).clamp(0.0015, 0.006)  # slow down before the goal
        speed = torch.where(self.phase == PUSH, push_speed, torch.where(self.phase == SLIDE_IN, SLIDE_SPEED, TRAVEL_SPEED))
        actions = torch.zeros(env.num_envs, env.num_actions, device=env.device)
        actions[:, self.arm_slice] = self.servo.actions(target, rotation, speed)
        closed = (self.phase <= RISE) | (self.phase >= CLOSE)  # closed while near the box outside the slide-in
        actions[:, self.gripper_slice] = torch.where(closed, -1.0, 1.0).unsqueeze(1)
        return actions

    def _waypoints(self, box: torch.Tensor, yaw: torch.Tensor, tip: torch.Tensor, pushed: torch.Tensor) -> torch.Tensor:
        """(num_envs, 9, 3) the tool point's waypoint of each phase [m, world]; rising goes back from the box's side
        before the push is done, toward the point behind the pinch after it."""
        hz = self.half_size[2]
        _, extent_y = self._extents(yaw)
        low = torch.full_like(yaw, 0.03)
        push_x = box[:, 0] - (0.2 * yaw).clamp(-0.08, 0.08)  # off centre, against the box's turn
        at_push = torch.stack([push_x, box[:, 1] - extent_y - 0.04, low], 1)
        push = torch.stack([push_x, box[:, 1] - extent_y + 0.03, low], 1)
        pinch = self._pinch(box, yaw)
        behind = pinch - pinch.new_tensor([0.12, 0.0, 0.0])
        high = torch.full_like(yaw, 0.12 + 2 * hz)
        rise = torch.where(pushed.unsqueeze(1), torch.stack([torch.minimum(tip[:, 0], behind[:, 0]), tip[:, 1], high], 1),
                           torch.stack([tip[:, 0], torch.minimum(tip[:, 1], at_push[:, 1] + 0.01), high], 1))
        lifted = torch.stack([tip[:, 0], tip[:, 1], torch.full_like(yaw, 0.2)], 1)  # straight up, then held there
        up = box.new_tensor([0.0, 0.0, 0.12])
        return torch.stack([at_push + up, at_push, push, rise, behind + box.new_tensor([0.0, 0.0, 0.2]), behind,
                            pinch, pinch, lifted], 1)

    def _extents(self, yaw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(num_envs,) each the box's half extent along the world x and y [m], turned by `yaw` [rad]."""
        hx, hy, _ = self.half_size
        cos, sin = yaw.cos().abs(), yaw.sin().abs()
        return hx * cos + hy * sin, hx * sin + hy * cos

    def _pinch(self, box: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
        """(num_envs, 3) where the tool point pinches the overhanging strip [m, world]."""
        extent_x, extent_y = self._extents(yaw)
        pinch_y = (box[:, 1] + extent_y - 0.015).clamp(min=self.edge_y + self.pinch_beyond)
        return torch.stack([box[:, 0] - extent_x + self.pinch_depth, pinch_y, box[:, 2] + 0.005], 1)

    def _phase(self, tip: torch.Tensor, box: torch.Tensor, finger: torch.Tensor, finger_speed: torch.Tensor,
               waypoints: torch.Tensor, pushed: torch.Tensor, lifted: torch.Tensor) -> torch.Tensor:
        """(num_envs,) each env's phase from the tool point and the box's centre [m], the finger's opening [m] and
        speed [m/s], the waypoints, whether the push is done and whether the box is off the table."""
        hz = self.half_size[2]
        to = waypoints - tip.unsqueeze(1)  # (num_envs, 9, 3)
        flat = to[..., :2].norm(dim=-1)
        low = tip[:, 2] < 2 * hz + 0.04
        # The push: travel high to above its start, go down, push along y.
        phase = torch.full_like(self.phase, ABOVE_PUSH)
        phase = torch.where(low, RISE, phase)
        phase = torch.where(flat[:, AT_PUSH] < 0.04, AT_PUSH, phase)
        in_push_lane = ((tip[:, 2] < 2 * hz - 0.005) & (to[:, PUSH, 0].abs() < 0.03)  # below the box's top, behind it
                        & (to[:, AT_PUSH, 1] < 0.06) & (to[:, PUSH, 1] > -0.01))
        phase = torch.where(in_push_lane, PUSH, phase)
        # The pinch: travel high to above the point behind it, go down, slide in, close, lift.
        pinch_phase = torch.where(low, RISE, ABOVE_BEHIND)
        above_behind = (flat[:, BEHIND] < 0.03) & (to[:, BEHIND, 2] < 0.03)
        near_lane = (to[:, SLIDE_IN, 1].abs() < 0.04) & (to[:, SLIDE_IN, 2].abs() < 0.03) & (to[:, SLIDE_IN, 0] > -0.02)
        pinch_phase = torch.where(above_behind | near_lane, BEHIND, pinch_phase)  # align there, or back out to it
        aligned = (to[:, BEHIND].norm(dim=-1) < 0.015) & (to[:, BEHIND, 2].abs() < 0.005)  # ready to slide in
        in_slide_lane = ((to[:, SLIDE_IN, 1].abs() < 0.02) & (to[:, SLIDE_IN, 2].abs() < 0.01)
                         & (to[:, SLIDE_IN, 0] > -0.02) & (to[:, BEHIND, 0] < -0.01))
        pinch_phase = torch.where((aligned | in_slide_lane) & (finger > 0.03), SLIDE_IN, pinch_phase)
        at_pinch = to[:, CLOSE].norm(dim=-1)
        closing = ((at_pinch < 0.015) | ((at_pinch < 0.05) & (finger < 0.03))) & (finger > 0.008)  # not on nothing
        pinch_phase = torch.where(closing, CLOSE, pinch_phase)
        # Closed on something: stopped, or with the box off the table (a swinging box shakes the fingers).
        squeezing = (finger > 0.008) & (finger < 0.022) & ((finger_speed.abs() < 0.01) | lifted)
        in_hand = (at_pinch < 0.05) | (lifted & ((box - tip).norm(dim=1) < self.in_hand_radius))  # it may tilt, held
        pinch_phase = torch.where(squeezing & in_hand, LIFT, pinch_phase)
        return torch.where(pushed, pinch_phase, phase)
