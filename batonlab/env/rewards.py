# SPDX-License-Identifier: BSD-3-Clause
"""Reward and cost managers: weighted sums of terms, with per-term episode sums for logging."""

from __future__ import annotations

import torch

from batonlab.env.cfg import CostTermCfg, RewardTermCfg
from batonlab.env.terms import build_term


class RewardManager:
    """`reward = sum_k weight_k * term_k(env) * step_dt`; episode sums are logged per term.

    Weights are read from the term configs at every step, and terms of weight 0 are built and
    evaluated like the others: a curriculum can raise a weight during training (and a stateful term
    is then up to date), and its episode sum is logged from the start.
    """

    def __init__(self, env, cfgs: dict[str, RewardTermCfg], only_positive: bool = False,
                 unclipped: tuple[str, ...] = ()):
        """Args:
            only_positive: Clip each step's total at zero (`TaskCfg.only_positive_rewards`).
            unclipped: Terms added after that clip (`TaskCfg.termination_rewards`).
        """
        self.env = env
        self.cfgs = cfgs
        self.only_positive = only_positive
        self.unclipped = frozenset(unclipped)
        self.terms = {name: build_term(c.func, c.params, env, f"rewards['{name}']") for name, c in cfgs.items()}
        self._sums = torch.zeros(env.num_envs, len(self.terms), device=env.device)
        self.episode_sums = {name: self._sums[:, k] for k, name in enumerate(self.terms)}
        """Each term's weighted sum over the current episode (num_envs,), a column of one buffer."""
        self._raw_sums = torch.zeros_like(self._sums)
        self.episode_raw_sums = {name: self._raw_sums[:, k] for k, name in enumerate(self.terms)}
        """Each term's unweighted sum over the current episode, term value × s (num_envs,): what a
        curriculum judges, blind to weights rescaled mid-episode."""
        self.reward = torch.zeros(env.num_envs, device=env.device)

    def compute(self, dt: float) -> torch.Tensor:
        """This step's reward (num_envs,), with the per-term episode sums updated."""
        self.reward.zero_()
        clip = self.only_positive
        after_clip = torch.zeros_like(self.reward) if clip else self.reward
        raws, values = [], []
        for name, term in self.terms.items():
            raw = term(self.env)
            if raw.shape != self.reward.shape:
                raise ValueError(f"reward term '{name}' must return (num_envs,), got {tuple(raw.shape)}")
            value = raw * (self.cfgs[name].weight * dt)
            (after_clip if clip and name in self.unclipped else self.reward).add_(value)
            raws.append(raw)
            values.append(value)
        if values:
            self._sums += torch.stack(values, dim=1)
            self._raw_sums += torch.stack(raws, dim=1) * dt
        if clip:
            self.reward.clamp_(min=0.0).add_(after_clip)
        return self.reward

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        """Mean episode sum of each term over the reset envs, per second of episode."""
        means = (self._sums[env_ids].mean(dim=0) / self.env.max_episode_length_s).unbind()
        self._sums[env_ids] = 0.0
        self._raw_sums[env_ids] = 0.0
        for term in self.terms.values():
            term.reset(env_ids)
        return {f"Episode_Reward/{name}": mean for name, mean in zip(self.terms, means)}


def episode_pay_per_s(env, env_ids: torch.Tensor, weights: dict[str, float]) -> torch.Tensor:
    """Per-second pay of reward terms over each episode so far at fixed `weights` (len(env_ids),):
    `sum_k weights[k] * raw episode sum_k / duration` [reward/s], the duration at least one step."""
    duration_s = (env.episode_length_buf[env_ids] * env.step_dt).clamp(min=env.step_dt)
    raw_sums = env.reward_manager.episode_raw_sums
    return sum(weight * raw_sums[name][env_ids] for name, weight in weights.items()) / duration_s


class CostManager:
    """Constraint costs (num_envs, num_costs) and their limits, for constrained PPO."""

    def __init__(self, env, cfgs: dict[str, CostTermCfg]):
        self.env = env
        self.names = list(cfgs)
        self.terms = {name: build_term(c.func, c.params, env, f"costs['{name}']") for name, c in cfgs.items()}
        self.limits = torch.tensor([c.limit for c in cfgs.values()], device=env.device)
        self.cost = torch.zeros(env.num_envs, len(cfgs), device=env.device)
        self.episode_sums = torch.zeros_like(self.cost)

    def compute(self) -> torch.Tensor:
        """This step's costs (num_envs, num_costs), with the episode sums updated."""
        for k, term in enumerate(self.terms.values()):
            self.cost[:, k] = term(self.env)
        self.episode_sums += self.cost
        return self.cost

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        """Mean episode cost of each term over the reset envs, for the log; then zero their sums."""
        log = {}
        for k, name in enumerate(self.names):
            log[f"Episode_Cost/{name}"] = self.episode_sums[env_ids, k].mean()
            self.terms[name].reset(env_ids)
        self.episode_sums[env_ids] = 0.0
        return log
