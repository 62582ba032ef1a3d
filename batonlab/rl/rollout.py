# SPDX-License-Identifier: BSD-3-Clause
"""The one rollout loop: a policy (or scripted actions) stepping a BatonEnv, one control step at a time."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from tensordict import TensorDict

from batonlab.env.env import BatonEnv

Actor = Callable[[TensorDict], torch.Tensor]
"""Observations → (num_envs, num_actions) actions."""


@dataclass
class Transition:
    """One control step of every env."""

    index: int
    """Control steps taken before this one."""
    obs: TensorDict
    """The observations the actions were computed from."""
    actions: torch.Tensor
    """(num_envs, num_actions) actions applied during the step."""
    next_obs: TensorDict
    """Observations after the step (of the next episode for envs that finished)."""
    reward: torch.Tensor
    """(num_envs,) reward of the step."""
    terminated: torch.Tensor
    """(num_envs,) bool, the episode ended on a failure term."""
    truncated: torch.Tensor
    """(num_envs,) bool, the episode reached its time limit."""
    extras: dict

    @property
    def done(self) -> torch.Tensor:
        """(num_envs,) bool, the episode ended (either way)."""
        return self.terminated | self.truncated


def rollout(env: BatonEnv, obs: TensorDict, act: Actor, num_steps: int | None = None) -> Iterator[Transition]:
    """Step `env` from `obs` with `act` for `num_steps` control steps (None: until the caller stops).

    Actions are computed and applied without autograd. The caller resets the env (the random stream
    of its resets and of `act` stays in the caller's order).
    """
    index = 0
    while num_steps is None or index < num_steps:
        with torch.inference_mode():
            actions = act(obs)
            next_obs, reward, terminated, truncated, extras = env.step(actions)
        yield Transition(index, obs, actions, next_obs, reward, terminated, truncated, extras)
        obs = next_obs
        index += 1


def smoothed_noise(env: BatonEnv, smoothing: float) -> Actor:
    """Random actions `a ← s·a + sqrt(1 - s²)·N(0, 1)`, clipped to [-1, 1], starting from zero."""
    action = torch.zeros(env.num_envs, env.num_actions, device=env.device)

    def act(obs: TensorDict) -> torch.Tensor:
        nonlocal action
        noise = env.normal((env.num_envs, env.num_actions))
        action = (smoothing * action + (1 - smoothing**2) ** 0.5 * noise).clamp(-1.0, 1.0)
        return action

    return act


def held_uniform(env: BatonEnv, hold: int) -> Actor:
    """A uniform random action in [-1, 1] per env, drawn now and anew every `hold` steps from the first."""
    state = {"steps": 0, "action": env.uniform((env.num_envs, env.num_actions), -1.0, 1.0)}

    def act(obs: TensorDict) -> torch.Tensor:
        if state["steps"] % hold == 0:
            state["action"] = env.uniform((env.num_envs, env.num_actions), -1.0, 1.0)
        state["steps"] += 1
        return state["action"]

    return act
