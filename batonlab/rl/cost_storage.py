# SPDX-License-Identifier: BSD-3-Clause
"""The rollout's constraint costs next to rsl-rl's RolloutStorage, and mini-batches that carry both.

rsl-rl's storage holds one reward per step; the constrained algorithms need K costs per step, the
multi-head cost critic's values, and GAE returns and advantages for each cost. `CostStorage` keeps
them step for step with rsl-rl's storage (same T x N layout, same dones), and `mini_batches`
draws the PPO batch and the cost batch with the same indices.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch
from rsl_rl.storage import RolloutStorage


@dataclass
class CostBatch:
    """The cost part of one mini-batch, aligned row for row with rsl-rl's `RolloutStorage.Batch`."""

    values: torch.Tensor
    """Cost critic values at collection time (batch, num_costs)."""
    returns: torch.Tensor
    """GAE cost returns, the cost critic's targets (batch, num_costs)."""
    advantages: torch.Tensor
    """Cost advantages, centred per cost but not scaled (batch, num_costs)."""


class CostStorage:
    """Per-step costs of one rollout and their GAE returns and advantages.

    Args:
        num_transitions_per_env: Rollout length T (rsl-rl's `num_steps_per_env`).
        num_envs: Number of envs N.
        num_costs: Number of costs K.
        device: Device of the learner.
    """

    def __init__(self, num_transitions_per_env: int, num_envs: int, num_costs: int, device: str | torch.device = "cpu"):
        shape = (num_transitions_per_env, num_envs, num_costs)
        self.num_transitions_per_env = num_transitions_per_env
        self.costs = torch.zeros(shape, device=device)
        """Costs of each step as the env reported them (T, N, K), before any time-out bootstrap."""
        self.values = torch.zeros(shape, device=device)
        """Cost critic values of each step's observation (T, N, K)."""
        self.time_outs = torch.zeros(num_transitions_per_env, num_envs, 1, device=device)
        """1.0 where the episode was truncated by its time limit at that step (T, N, 1)."""
        self.returns = torch.zeros(shape, device=device)
        """GAE cost returns (T, N, K)."""
        self.advantages = torch.zeros(shape, device=device)
        """Centred cost advantages (T, N, K)."""
        self.step = 0

    def add(self, costs: torch.Tensor, values: torch.Tensor, time_outs: torch.Tensor | None) -> None:
        """Record one env step: costs (N, K), cost values (N, K), time-outs (N,) or None."""
        if self.step >= self.num_transitions_per_env:
            raise OverflowError("cost storage is full; clear() it before the next rollout")
        self.costs[self.step].copy_(costs)
        self.values[self.step].copy_(values)
        if time_outs is None:
            self.time_outs[self.step].zero_()
        else:
            self.time_outs[self.step].copy_(time_outs.view(-1, 1))
        self.step += 1

    def clear(self) -> None:
        """Start a new rollout (the next `add` writes step 0)."""
        self.step = 0

    def mean_cost(self) -> torch.Tensor:
        """Mean cost per env step of this rollout (K,): the estimate of (1 - gamma) * J_C."""
        return self.costs.mean(dim=(0, 1))

    def compute_returns(self, last_values: torch.Tensor, dones: torch.Tensor, gamma: float, lam: float) -> None:
        """GAE over the rollout with the reward's gamma, lambda and dones.

        A time-out is bootstrapped as rsl-rl bootstraps rewards: the step's cost gets
        `gamma * V_C(s_t)` added, since the truncated episode would have gone on.

        Args:
            last_values: Cost values of the observation after the last step (N, K).
            dones: rsl-rl's `storage.dones` (T, N, 1), 1 where the episode ended at that step.
            gamma: Discount factor.
            lam: GAE lambda.
        """
        costs = self.costs + gamma * self.values * self.time_outs
        advantage = torch.zeros_like(last_values)
        for step in reversed(range(self.num_transitions_per_env)):
            next_values = last_values if step == self.num_transitions_per_env - 1 else self.values[step + 1]
            next_is_not_terminal = 1.0 - dones[step].float()
            delta = costs[step] + next_is_not_terminal * gamma * next_values - self.values[step]
            advantage = delta + next_is_not_terminal * gamma * lam * advantage
            self.returns[step] = advantage + self.values[step]
        advantages = self.returns - self.values
        # Centred but not scaled: the cost surrogate must stay in cost units, the units of mean cost - limit.
        self.advantages = advantages - advantages.mean(dim=(0, 1))


def mini_batches(storage: RolloutStorage, cost_storage: CostStorage, num_mini_batches: int,
                 num_epochs: int) -> Iterator[tuple[RolloutStorage.Batch, CostBatch]]:
    """Shuffled flat mini-batches of rsl-rl's storage and the cost storage, drawn with the same indices.

    It draws as rsl-rl's `mini_batch_generator` does (one permutation for all epochs), for
    feed-forward models only.
    """
    batch_size = storage.num_envs * storage.num_transitions_per_env
    mini_batch_size = batch_size // num_mini_batches
    indices = torch.randperm(num_mini_batches * mini_batch_size, device=storage.device)

    observations = storage.observations.flatten(0, 1)
    actions = storage.actions.flatten(0, 1)
    values = storage.values.flatten(0, 1)
    returns = storage.returns.flatten(0, 1)
    old_actions_log_prob = storage.actions_log_prob.flatten(0, 1)
    advantages = storage.advantages.flatten(0, 1)
    old_distribution_params = tuple(p.flatten(0, 1) for p in storage.distribution_params)
    cost_values = cost_storage.values.flatten(0, 1)
    cost_returns = cost_storage.returns.flatten(0, 1)
    cost_advantages = cost_storage.advantages.flatten(0, 1)

    for _ in range(num_epochs):
        for i in range(num_mini_batches):
            idx = indices[i * mini_batch_size:(i + 1) * mini_batch_size]
            batch = RolloutStorage.Batch(
                observations=observations[idx],
                actions=actions[idx],
                values=values[idx],
                advantages=advantages[idx],
                returns=returns[idx],
                old_actions_log_prob=old_actions_log_prob[idx],
                old_distribution_params=tuple(p[idx] for p in old_distribution_params),
            )
            yield batch, CostBatch(values=cost_values[idx], returns=cost_returns[idx], advantages=cost_advantages[idx])
