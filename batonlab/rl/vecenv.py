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
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length_buf[:] = value

    def get_observations(self) -> TensorDict:
        return self.env.get_observations()

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        obs, reward, terminated, truncated, extras = self.env.step(actions)
        extras["time_outs"] = truncated
        return obs, reward, (terminated | truncated).to(torch.long), extras
