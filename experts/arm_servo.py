# SPDX-License-Identifier: BSD-3-Clause
"""A Cartesian servo for a position-controlled arm: joint-target actions that carry its tool along straight
lines to waypoints, batched over envs (damped least-squares IK of the arm's kinematic chain)."""

from __future__ import annotations

import torch

from batonlab.actions.ik import TorchChain, rotation_matrices, rotation_vectors
from batonlab.actions.tool_step import ToolStepAction
from batonlab.robots.kinematics import chain_from_model


class ArmPoseServo:
    """Raw actions of a `JointPositionAction` term that move the tool toward a pose, a bounded step per control step.

    The commanded tool point integrates the measured error (`gain` per step, at most `speed` [m] per step) and
    leads the measured one by at most `lead` [m]: the arm's sag under gravity and loads is taken up without a
    model of it, and an unreachable waypoint winds nothing up. The commanded rotation turns at most `max_turn`
    [rad] per step; with `symmetric_gripper` a rotation and its half turn about the tool's approach (z) axis
    are the same grasp, and the nearer one is taken. Frames: the chain's base (for a table-mounted arm, the world).

    Args:
        env: The `BatonEnv`.
        action: Name of the arm's `JointPositionAction` term.
        base, tip_site, joints: The kinematic chain, as `batonlab.robots.kinematics.chain_from_model` takes them.
        iterations: Damped least-squares iterations per control step (half steps, from the last target).
        damping: DLS damping [m].
        rot_weight: Weight of the rotation error against the position error [m/rad].
    """

    def __init__(self, env, action: str, base: str, tip_site: str, joints: tuple[str, ...], iterations: int = 10,
                 damping: float = 0.03, rot_weight: float = 0.3, gain: float = 0.4, lead: float = 0.05,
                 max_turn: float = 0.15, symmetric_gripper: bool = True):
        self.env = env
        self.term = env.action_manager.terms[action]
        self.chain = TorchChain(chain_from_model(env.scene.model, base, tip_site, joints), device=env.device)
        self.qpos_adr = env.scene.qpos_adr(list(joints)).to(env.device)
        limits = env.scene.model.jnt_range[env.scene.joint_ids(list(joints))]
        self.low, self.high = (torch.as_tensor(limits[:, k], dtype=torch.float32, device=env.device) for k in (0, 1))
        self.iterations, self.damping, self.rot_weight = iterations, damping, rot_weight
        self.gain, self.lead, self.max_turn, self.symmetric_gripper = gain, lead, max_turn, symmetric_gripper

    def tool_pose(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The measured tool pose: position (num_envs, 3) [m] and rotation (num_envs, 3, 3), base frame."""
        tip, rot, _ = self.chain.jacobian(self.env.sim.qpos[:, self.qpos_adr])
        return tip, rot

    def actions(self, waypoint: torch.Tensor, rotation: torch.Tensor, speed: torch.Tensor | float) -> torch.Tensor:
        """Raw actions of the arm's term toward `waypoint` (num_envs, 3) [m] and `rotation` (num_envs, 3, 3), the
        commanded point moving at most `speed` [m per control step] (a float or (num_envs,)): (num_envs, n) joint
        targets, or for a `ToolStepAction` (num_envs, 6) the steps themselves."""
        tip, rot = self.tool_pose()
        step = self.gain * (waypoint - tip)
        speed = torch.as_tensor(speed, dtype=tip.dtype, device=tip.device).reshape(-1, 1)
        step = step * (speed / step.norm(dim=1, keepdim=True).clamp_min(1e-9)).clamp(max=1.0)
        if isinstance(self.term, ToolStepAction):  # the term integrates the point and bounds its lead itself
            turn = rotation_vectors(self._turn_toward(rot, rotation) @ rot.transpose(1, 2))
            return torch.cat([step / self.term.position_scale, turn / self.term.rotation_scale], 1)
        last = self.last_targets()
        lead = self.chain.jacobian(last)[0] - tip
        lead = lead * (self.lead / lead.norm(dim=1, keepdim=True).clamp_min(self.lead))
        point, turn = tip + lead + step, self._turn_toward(rot, rotation)
        q = self.chain.dls_solve(last, point, self.damping, turn, self.rot_weight, self.iterations, self.low, self.high)
        return (q - self.term.offset) / self.term.scale

    def last_targets(self) -> torch.Tensor:
        """(num_envs, n) the joint targets the arm's last raw action asked for [rad], inside the control range (before
        the command filter: a function of the policy's `last_action` observation, so a student can follow it)."""
        raw = self.term.raw_actions if self.term.cfg.clip is None else self.term.raw_actions.clamp(*self.term.cfg.clip)
        return torch.maximum(torch.minimum(raw * self.term.scale + self.term.offset, self.term.ctrl_high), self.term.ctrl_low)

    def _turn_toward(self, rot: torch.Tensor, goal: torch.Tensor) -> torch.Tensor:
        """The goal rotation, or the rotation at most `max_turn` from `rot` toward it."""
        goal = goal.expand_as(rot)
        if self.symmetric_gripper:
            half_turn = goal * torch.tensor([-1.0, -1.0, 1.0], dtype=goal.dtype, device=goal.device)
            nearer = (half_turn * rot).sum((1, 2)) > (goal * rot).sum((1, 2))
            goal = torch.where(nearer.view(-1, 1, 1), half_turn, goal)
        turn = rotation_vectors(goal @ rot.transpose(1, 2))
        angle = turn.norm(dim=1, keepdim=True)
        partial = rotation_matrices(turn * (self.max_turn / angle.clamp_min(self.max_turn))) @ rot
        return torch.where((angle > self.max_turn).view(-1, 1, 1), partial, goal)
