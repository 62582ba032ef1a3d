# SPDX-License-Identifier: BSD-3-Clause
"""Joint-space action terms: policy output → position, velocity or effort targets of named joints."""

from __future__ import annotations

import torch

from batonlab.env.actions import ActionTerm
from batonlab.env.cfg import ActionTermCfg


class JointAction(ActionTerm):
    """Shared parts of joint-space actions: joint lookup, scale, offset and clipping."""

    action_type = "joint"

    def __init__(self, env, cfg: ActionTermCfg):
        self.cfg = cfg
        scene = env.scene
        self.joint_names = list(cfg.joints)
        self.actuator_ids = scene.actuator_for_joints(self.joint_names)
        self.qpos_adr = scene.qpos_adr(self.joint_names)
        self.dof_adr = scene.dof_adr(self.joint_names)
        self.scale = _per_joint(cfg.scale, self.joint_names)
        self.offset = torch.zeros(len(self.joint_names))
        self.raw_actions = torch.zeros(env.num_envs, self.action_dim, device=env.device)
        self.processed_actions = torch.zeros_like(self.raw_actions)
        low, high = scene.actuator_ctrl_range(self.actuator_ids)
        self.ctrl_low, self.ctrl_high = low.to(env.device), high.to(env.device)
        self.scale = self.scale.to(env.device)
        self.offset = self.offset.to(env.device)
        self.actuator_ids = self.actuator_ids.to(env.device)

    @property
    def action_dim(self) -> int:
        """One action per joint in `joint_names`."""
        return len(self.joint_names)

    def process(self, actions: torch.Tensor) -> None:
        """Store the raw actions and compute the targets (num_envs, action_dim)."""
        self.raw_actions[:] = actions
        if self.cfg.clip is not None:
            actions = actions.clamp(*self.cfg.clip)
        self.processed_actions[:] = actions * self.scale + self.offset

    def apply(self, ctrl: torch.Tensor) -> None:
        """Write the targets into the backend's `ctrl`, within the actuators' ctrlrange."""
        targets = torch.maximum(torch.minimum(self.processed_actions, self.ctrl_high), self.ctrl_low)
        ctrl.index_copy_(1, self.actuator_ids, targets)

    def reset(self, env_ids: torch.Tensor) -> None:
        """Zero the raw actions of the envs that reset."""
        self.raw_actions[env_ids] = 0.0

    def saturation_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(low, high) raw actions per dim beyond which the target no longer changes (the clip, and the
        actuator's control range mapped back through scale and offset; ±inf where neither applies)."""
        low = (self.ctrl_low - self.offset) / self.scale
        high = (self.ctrl_high - self.offset) / self.scale
        low, high = torch.minimum(low, high), torch.maximum(low, high)  # a negative scale swaps them
        if self.cfg.clip is not None:
            low, high = low.clamp_min(self.cfg.clip[0]), high.clamp_max(self.cfg.clip[1])
        return low, high


class JointPositionAction(JointAction):
    """Position targets for PD servos: `target = default_pos + scale * action` [rad or m], optionally kept
    inside the robot's command filter (`ActionTermCfg.max_target_rate`)."""

    action_type = "joint_position"

    def __init__(self, env, cfg: ActionTermCfg):
        super().__init__(env, cfg)
        if cfg.use_default_offset:
            self.offset = env.scene.default_qpos[self.qpos_adr].clone().to(env.device)
        self.limited = cfg.max_target_rate is not None
        if not self.limited:
            return
        if not cfg.max_target_rate > 0.0:
            raise ValueError(f"max_target_rate={cfg.max_target_rate} must be > 0 [rad/s or m/s] (or None)")
        self.env = env
        self.max_step = float(cfg.max_target_rate) * env.step_dt
        kp, kd = env.scene.actuator_gains(self.actuator_ids.cpu())
        self.kp = torch.as_tensor(kp, dtype=torch.float32, device=env.device).clamp_min(1e-9)
        self.kd = torch.as_tensor(kd, dtype=torch.float32, device=env.device)
        self.torque = torch.as_tensor(env.scene.actuator_force_limits(self.actuator_ids.cpu()), dtype=torch.float32,
                                      device=env.device)
        self.previous_targets = torch.zeros(env.num_envs, self.action_dim, device=env.device)
        """The last executed targets (num_envs, action_dim); at a reset, the joints' positions."""

    def process(self, actions: torch.Tensor) -> None:
        """Store the raw actions and compute the targets (num_envs, action_dim), filtered as on the robot."""
        super().process(actions)
        if not self.limited:
            return
        q = self.env.sim.qpos.index_select(1, self.qpos_adr)
        qd = self.env.sim.qvel.index_select(1, self.dof_adr)
        targets = torch.maximum(torch.minimum(self.processed_actions, self.ctrl_high), self.ctrl_low)  # as the robot's
        targets = command_filter_targets(targets, self.previous_targets, q, qd, self.kp, self.kd,  # post-processing
                                         self.torque, self.ctrl_low, self.ctrl_high, self.max_step)
        self.processed_actions[:] = targets
        self.previous_targets[:] = targets

    def reset(self, env_ids: torch.Tensor) -> None:
        """Zero the raw actions; the filter's previous targets become the joints' reset positions."""
        super().reset(env_ids)
        if self.limited:
            q = self.env.sim.qpos.index_select(1, self.qpos_adr).index_select(0, env_ids)
            self.previous_targets.index_copy_(0, env_ids, torch.maximum(torch.minimum(q, self.ctrl_high), self.ctrl_low))


def command_filter_targets(targets: torch.Tensor, previous: torch.Tensor, q: torch.Tensor, qd: torch.Tensor,
                           kp: torch.Tensor, kd: torch.Tensor, torque: torch.Tensor, low: torch.Tensor,
                           high: torch.Tensor, max_step: float) -> torch.Tensor:
    """The robot's position-command rule, batched (the torch twin of `batonlab.deploy.safety.SafetyFilter`'s
    run-state limit): targets kept where `kp·(target − q) − kd·q̇` is within ±torque, then within `max_step`
    of the previous targets and inside [low, high]. Tensors (num_envs, n) or (n,), in joint units."""
    targets = torch.clamp(targets, q + (-torque + kd * qd) / kp, q + (torque + kd * qd) / kp)
    window_low = torch.maximum(low, previous - max_step)
    window_high = torch.minimum(high, previous + max_step)
    return torch.minimum(torch.maximum(targets, window_low), window_high)


class JointVelocityAction(JointAction):
    """Velocity targets for velocity servos (wheels): `target = scale * action` [rad/s]."""

    action_type = "joint_velocity"


class JointEffortAction(JointAction):
    """Torques for motor actuators: `torque = scale * action` [N·m]."""

    action_type = "joint_effort"


def _per_joint(value: float | dict[str, float], joints: list[str]) -> torch.Tensor:
    if isinstance(value, dict):
        missing = [j for j in joints if j not in value]
        if missing:
            raise KeyError(f"action scale has no value for joints {missing}")
        return torch.tensor([float(value[j]) for j in joints])
    return torch.full((len(joints),), float(value))
