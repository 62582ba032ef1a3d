# SPDX-License-Identifier: BSD-3-Clause
"""What the command-layer experts share: their base (sensors, action slices, the finger opening, the actions they
return), a parallel jaw's orientation from an approach and a finger axis, and a tool pose command that glides toward
its goal (moving first, turning once near)."""

from __future__ import annotations

import torch

from batonlab.env.terms import ExpertTerm
from batonlab.robots.arm6 import GRIPPER_JOINT
from batonlab.utils.quaternions import quat_angle_between, quat_canonical, quat_slerp


class CommandLayerExpert(ExpertTerm):
    """Base of experts whose actions are a `WholeBodyCommandAction` term's and a gripper term's (+1 open, -1 closed).

    Args:
        sensors: The sensors the expert reads, by its own names (`read`); checked now.
        commands, gripper: The action terms; or `commands` a command layer the env does not act through (a flat task's
            teacher, `experts.hierarchy`), the actions then being its own followed by the gripper's one.
    """

    def __init__(self, env, sensors: dict[str, str], commands="commands", gripper: str = "gripper"):
        self.env, self.sensors = env, dict(sensors)
        for name in self.sensors.values():
            env.sim.sensor(name)  # fail now on a wrong name
        if isinstance(commands, str):
            self.term = env.action_manager.terms[commands]
            self.commands_slice = env.action_manager.term_slice(commands)
            self.gripper_slice = env.action_manager.term_slice(gripper)
            self.num_actions = env.num_actions
        else:
            self.term, dim = commands, commands.action_dim
            self.commands_slice, self.gripper_slice, self.num_actions = slice(0, dim), slice(dim, dim + 1), dim + 1
        self.finger_adr = env.scene.qpos_adr([GRIPPER_JOINT]).to(env.device)
        self.phase = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
        """(num_envs,) the phase of the last call, for inspection."""

    def read(self, name: str) -> torch.Tensor:
        """The sensor named by `sensors[name]`, (num_envs, k)."""
        return self.env.sim.sensor(self.sensors[name])

    def opening(self) -> torch.Tensor:
        """(num_envs,) the finger's opening [m]."""
        return self.env.sim.qpos[:, self.finger_adr[0]]

    def actions(self, speed: torch.Tensor, yaw_rate: torch.Tensor, position: torch.Tensor, quat: torch.Tensor,
                close: torch.Tensor) -> torch.Tensor:
        """(num_envs, num_actions) the actions commanding base `speed` [m/s] and `yaw_rate` [rad/s] (num_envs,), the
        tool at `position` (num_envs, 3) [m] and `quat` (num_envs, 4) in the arm base frame, the gripper closed where
        `close` (num_envs,) bool."""
        actions = torch.zeros(self.env.num_envs, self.num_actions, device=self.env.device)
        actions[:, self.commands_slice] = self.term.actions_for(torch.stack([speed, yaw_rate], 1),
                                                                torch.cat([position, quat], 1))
        actions[:, self.gripper_slice] = torch.where(close, -1.0, 1.0)[:, None]
        return actions


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
