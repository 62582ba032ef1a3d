# SPDX-License-Identifier: BSD-3-Clause
"""rsl-rl's VecEnv contract on top of BatonEnv: the one place terminated/truncated become dones."""

from __future__ import annotations

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from batonlab.env.env import BatonEnv


class RslRlVecEnv(VecEnv):
    """Adapter: `dones = terminated | truncated`, `extras["time_outs"] = truncated` (bootstrapped)."""

    def __init__(self, env: BatonEnv):
        self.env = env
        self.num_envs = env.num_envs
        self.num_actions = env.num_actions
        self.max_episode_length = env.max_episode_length
        self.device = env.device
        self.cfg = env.cfg

    @property
    def episode_length_buf(self) -> torch.Tensor:
        """The env's steps into the current episode (N,) [control steps]."""
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        """Overwrite the env's episode lengths in place (rsl-rl randomizes them at start)."""
        self.env.episode_length_buf[:] = value

    def get_observations(self) -> TensorDict:
        """The env's current observation groups (TensorDict of (N, dim) tensors)."""
        return self.env.get_observations()

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        """Step the env: `(obs, reward (N,), dones (N,) long, extras with time_outs (N,))`."""
        obs, reward, terminated, truncated, extras = self.env.step(actions)
        extras["time_outs"] = truncated
        return obs, reward, (terminated | truncated).to(torch.long), extras

    # What the runner reads from and tells the task, named so that it never reaches into the env.

    @property
    def cost_names(self) -> list[str]:
        """Names of the task's constraint costs, in the order of `extras["costs"]`."""
        return list(self.env.cost_manager.names)

    def cost_limits(self) -> torch.Tensor:
        """(num_costs,) allowed mean cost per control step; curricula may move them, so read each iteration."""
        return self.env.cost_manager.limits.clone()

    @property
    def privileged_groups(self) -> tuple[str, ...]:
        """Observation groups only critics and teachers read."""
        return tuple(name for name, group in self.env.cfg.observations.items() if group.privileged)

    def observation_layout(self, group: str) -> list:
        """The `ObsTermLayout`s of one observation group, in column order."""
        return self.env.observation_manager.layout[group]

    def action_saturation_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(num_actions,) low and high raw actions beyond which the executed command saturates."""
        return self.env.action_manager.saturation_bounds()

    def observe_advantages(self, abs_advantage: torch.Tensor) -> None:
        """Hand the rollout's (num_steps, num_envs) |advantage| to the curricula that learn from it."""
        self.env.curriculum_manager.observe_advantages(abs_advantage.to(self.device))

    @property
    def physics_diverged_total(self) -> int:
        """Worlds reset for diverged physics since the start."""
        return int(self.env.sim.num_diverged_total)

    def training_state(self) -> dict:
        """The env's share of a checkpoint: curriculum state and the step counter."""
        return {"curriculum": self.env.curriculum_manager.state_dict(),
                "common_step_counter": self.env.common_step_counter}

    def load_training_state(self, state: dict, strict: bool) -> None:
        """Restore `training_state()`; `strict=False` lets a task that drops some curricula load it."""
        self.env.curriculum_manager.load_state_dict(state["curriculum"], strict=strict)
        self.env.common_step_counter = int(state["common_step_counter"])

    def close(self) -> None:
        """Close the env."""
        self.env.close()
