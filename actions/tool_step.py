# SPDX-License-Identifier: BSD-3-Clause
"""Arm actions as steps of the tool: the policy moves a commanded tool point and turns the tool, and damped
least-squares IK turns that into joint position targets (the arm's chain, batched)."""

from __future__ import annotations

import torch

from batonlab.actions.ik import TorchChain, rotation_matrices
from batonlab.actions.joint import JointPositionAction, command_filter_targets
from batonlab.env.cfg import ActionTermCfg
from batonlab.robots.kinematics import chain_from_model


class ToolStepAction(JointPositionAction):
    """Six actions per step: the commanded tool point moves by `position_scale * action[:3]` [m] and stays within
    `max_lead` [m] of the measured point; the tool's goal rotation is the measured one turned by the rotation vector
    `rotation_scale * action[3:]` [rad]; base frame, actions clipped to ±1.

    The commanded point integrates the steps, so a policy that steps toward a waypoint from the measured point
    takes up the arm's sag (4-6 cm on arm6) without a model of it, and the lead bound keeps an unreachable point
    from winding up. The rotation is relative to the measured one (the sag in it is small), as in Isaac Lab's
    relative IK: an integrated rotation overshot the scripted expert's turns (docs/PRIVILEGES.md). The joint targets are
    `iterations` half damped least-squares steps from the last ones, then the command filter (`max_target_rate`).

    `cfg.params`: `base`, `site` (the chain, as `chain_from_model` takes it), `position_scale` (0.025 m),
    `rotation_scale` (0.15 rad), `max_lead` (0.05 m), `iterations` (10), `damping` (0.03 m), `rotation_weight`
    (0.3 m/rad of rotation error in the IK).
    """

    action_type = "tool_step"

    def __init__(self, env, cfg: ActionTermCfg):
        super().__init__(env, cfg)
        params = dict(cfg.params)
        self.chain = TorchChain(chain_from_model(env.scene.model, params["base"], params["site"], tuple(cfg.joints)),
                                device=env.device)
        self.position_scale = float(params.get("position_scale", 0.025))
        self.rotation_scale = float(params.get("rotation_scale", 0.15))
        self.max_lead = float(params.get("max_lead", 0.05))
        self.iterations = int(params.get("iterations", 10))
        self.damping = float(params.get("damping", 0.03))
        self.rotation_weight = float(params.get("rotation_weight", 0.3))
        limits = env.scene.model.jnt_range[env.scene.joint_ids(list(cfg.joints))]
        self.joint_low, self.joint_high = (torch.as_tensor(limits[:, k], dtype=torch.float32, device=env.device)
                                           for k in (0, 1))
        joints = len(self.joint_names)
        self.processed_actions = torch.zeros(env.num_envs, joints, device=env.device)
        self.previous_targets = torch.zeros(env.num_envs, joints, device=env.device)
        self.ik_targets = torch.zeros(env.num_envs, joints, device=env.device)
        """(num_envs, joints) the last IK solution [rad], before the command filter."""
        self.command_pos = torch.zeros(env.num_envs, 3, device=env.device)
        """(num_envs, 3) the commanded tool point [m, base frame]."""
        self.command_rot = torch.eye(3, device=env.device).repeat(env.num_envs, 1, 1)
        """(num_envs, 3, 3) the tool rotation of the last step's IK, base frame."""

    @property
    def action_dim(self) -> int:
        """Three position steps and three rotation steps."""
        return 6

    def tool_pose(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The measured tool pose: position (num_envs, 3) [m] and rotation (num_envs, 3, 3), base frame."""
        tip, rot, _ = self.chain.jacobian(self.env.sim.qpos.index_select(1, self.qpos_adr))
        return tip, rot

    def process(self, actions: torch.Tensor) -> None:
        """Step the commanded pose and solve the IK for the joint targets (num_envs, joints)."""
        self.raw_actions[:] = actions
        actions = actions.clamp(-1.0, 1.0)
        tip, rot = self.tool_pose()
        lead = self.command_pos + self.position_scale * actions[:, :3] - tip
        lead = lead * (self.max_lead / lead.norm(dim=1, keepdim=True).clamp_min(self.max_lead))
        self.command_pos = tip + lead
        self.command_rot = rotation_matrices(self.rotation_scale * actions[:, 3:]) @ rot
        q = self.chain.dls_solve(self.ik_targets, self.command_pos, self.damping, self.command_rot, self.rotation_weight,
                                 self.iterations, self.joint_low, self.joint_high)
        self.ik_targets = q
        targets = torch.maximum(torch.minimum(q, self.ctrl_high), self.ctrl_low)
        if self.limited:
            joint_pos = self.env.sim.qpos.index_select(1, self.qpos_adr)
            joint_vel = self.env.sim.qvel.index_select(1, self.dof_adr)
            targets = command_filter_targets(targets, self.previous_targets, joint_pos, joint_vel, self.kp, self.kd,
                                             self.torque, self.ctrl_low, self.ctrl_high, self.max_step)
        self.processed_actions[:] = targets
        self.previous_targets[:] = targets

    def reset(self, env_ids: torch.Tensor) -> None:
        """Zero the actions; the IK and filter start from the joints' positions, the command from the tool point."""
        self.raw_actions[env_ids] = 0.0
        q = self.env.sim.qpos.index_select(1, self.qpos_adr).index_select(0, env_ids)
        q = torch.maximum(torch.minimum(q, self.ctrl_high), self.ctrl_low)
        self.previous_targets.index_copy_(0, env_ids, q)
        self.ik_targets.index_copy_(0, env_ids, q)
        tip, rot, _ = self.chain.jacobian(q)
        self.command_pos.index_copy_(0, env_ids, tip)
        self.command_rot.index_copy_(0, env_ids, rot)

    def saturation_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """±1: the actions are clipped there."""
        ones = torch.ones(6, device=self.raw_actions.device)
        return -ones, ones

