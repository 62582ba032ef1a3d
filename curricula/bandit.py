# SPDX-License-Identifier: BSD-3-Clause
"""Self-evolving bandit curriculum: categories (terrain types, levels or tiles) are the arms of a
non-stationary bandit whose reward is the learner's mean |advantage| on that category.

A large |advantage| means the policy's value estimates are still wrong there: it is where the
learner is currently learning the most. Each arm keeps a value updated by TD(0),
`V_k <- V_k + alpha * (r_k - V_k)`, and resetting envs draw their next category from the Boltzmann
distribution `softmax(V / temperature)` (Self-Evolving Curriculum, Chen et al. 2025). It replaces
the level curriculum when used on the terrain grid.

The runner feeds each rollout's per-step |advantage| through `CurriculumManager.observe_advantages`.
"""

from __future__ import annotations

from typing import Literal

import torch
from batonlab.env.terms import CurriculumTerm


class BoltzmannBandit:
    """Arm values with TD(0) updates and Boltzmann (softmax) sampling.

    Args:
        num_arms: Number of categories.
        learning_rate: TD(0) step size alpha in (0, 1].
        temperature: Softmax temperature [reward units]; lower is greedier.
        initial_value: Starting value of every arm (equal values sample uniformly).
    """

    def __init__(self, num_arms: int, learning_rate: float = 0.1, temperature: float = 0.1, initial_value: float = 0.0):
        if num_arms < 1 or not 0.0 < learning_rate <= 1.0 or temperature <= 0.0:
            raise ValueError(f"need num_arms >= 1, 0 < learning_rate <= 1, temperature > 0; got {num_arms}, "
                             f"{learning_rate}, {temperature}")
        self.learning_rate = learning_rate
        self.temperature = temperature
        self.values = torch.full((num_arms,), float(initial_value))
        self.counts = torch.zeros(num_arms, dtype=torch.long)
        """Number of TD updates each arm received."""

    @property
    def num_arms(self) -> int:
        """Number of arms."""
        return self.values.numel()

    def update(self, rewards: torch.Tensor, observed: torch.Tensor) -> None:
        """TD(0) towards this round's reward, for the arms that were observed (bool mask)."""
        observed = observed.cpu().bool()
        rewards = rewards.cpu().float()
        self.values[observed] += self.learning_rate * (rewards[observed] - self.values[observed])
        self.counts += observed.long()

    def probabilities(self) -> torch.Tensor:
        """Sampling distribution (num_arms,) = softmax(values / temperature)."""
        return torch.softmax(self.values / self.temperature, dim=0)

    def sample(self, n: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """n arm indices (long, CPU) drawn from `probabilities()`."""
        if n == 0:
            return torch.zeros(0, dtype=torch.long)
        if generator is not None and generator.device.type != "cpu":
            generator = None
        return torch.multinomial(self.probabilities(), n, replacement=True, generator=generator)

    def state_dict(self) -> dict:
        """Copies of the arm values and update counts, for a checkpoint."""
        return {"values": self.values.clone(), "counts": self.counts.clone()}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()`'s output of a bandit with as many arms."""
        if state["values"].shape != self.values.shape:
            raise ValueError(f"bandit state has {state['values'].numel()} arms, this bandit has {self.num_arms}")
        self.values[:] = state["values"]
        self.counts[:] = state["counts"]


def arm_rewards(
    abs_advantage: torch.Tensor, arm_per_sample: torch.Tensor, num_arms: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean |advantage| of each arm's samples.

    Args:
        abs_advantage: (num_steps, num_envs) |advantage| of each transition.
        arm_per_sample: (num_steps, num_envs) long, the arm each transition was collected on.

    Returns:
        rewards: (num_arms,) mean |advantage| per arm (0 where there was no sample).
        observed: (num_arms,) bool, arms that had samples.
    """
    arms = arm_per_sample.flatten().cpu()
    values = abs_advantage.flatten().cpu().float()
    sums = torch.zeros(num_arms).scatter_add_(0, arms, values)
    counts = torch.zeros(num_arms).scatter_add_(0, arms, torch.ones_like(values))
    return sums / counts.clamp(min=1.0), counts > 0


class TerrainBanditCurriculum(CurriculumTerm):
    """Curriculum term: a `BoltzmannBandit` over the tiles of the terrain grid.

    Args:
        env: The env (with a terrain grid on `env.terrain`).
        arms: "types" (one arm per terrain type; the level is drawn from `level_range`), "levels"
            (one arm per level; the type is drawn uniformly) or "cells" (one arm per level × type).
        learning_rate, temperature, initial_value: see `BoltzmannBandit`.
        level_range: (low, high) inclusive levels used with arms="types"; default all levels.
    """

    def __init__(
        self,
        env,
        arms: Literal["types", "levels", "cells"] = "types",
        learning_rate: float = 0.1,
        temperature: float = 0.1,
        initial_value: float = 0.0,
        level_range: tuple[int, int] | None = None,
    ):
        terrain = env.terrain
        self.terrain = terrain
        self.arms = arms
        self.num_levels, self.num_types = terrain.num_levels, terrain.num_types
        num_arms = {"types": self.num_types, "levels": self.num_levels, "cells": self.num_levels * self.num_types}.get(arms)
        if num_arms is None:
            raise ValueError(f"arms must be 'types', 'levels' or 'cells', got {arms!r}")
        self.level_range = tuple(level_range) if level_range is not None else (0, self.num_levels - 1)
        self.bandit = BoltzmannBandit(num_arms, learning_rate, temperature, initial_value)
        self.generator = env.generator
        # The arm each env is on now and the one before its last reset: a rollout's samples split between them.
        self.arm_of_env = self._arm_of_cell(terrain.levels, terrain.types).cpu()
        self.previous_arm = self.arm_of_env.clone()

    def __call__(self, env, env_ids: torch.Tensor) -> dict[str, float]:
        ids = env_ids.cpu()
        self.previous_arm[ids] = self.arm_of_env[ids]
        arms = self.bandit.sample(len(ids), self.generator)
        self.arm_of_env[ids] = arms
        levels, types = self._cell_of_arm(arms)
        self.terrain.set_cells(env_ids, levels.to(env_ids.device), types.to(env_ids.device))
        probs = self.bandit.probabilities()
        log = {}
        for k in range(self.bandit.num_arms):
            log[f"value_{k}"] = self.bandit.values[k].item()
            log[f"prob_{k}"] = probs[k].item()
        return log

    def observe_advantages(self, env, abs_advantage: torch.Tensor) -> None:
        """Update the arm values from a rollout's |advantage| (num_steps, num_envs).

        The last `episode_length` samples of an env were collected on its current arm, the earlier
        ones on its previous arm (exact when the env reset at most once during the rollout).
        """
        if abs_advantage.ndim == 1:
            abs_advantage = abs_advantage.unsqueeze(0)
        num_steps = abs_advantage.shape[0]
        steps_on_current = env.episode_length_buf.cpu().clamp(max=num_steps)
        t = torch.arange(num_steps).unsqueeze(1)
        on_current = t >= num_steps - steps_on_current.unsqueeze(0)
        arm_per_sample = torch.where(on_current, self.arm_of_env.unsqueeze(0), self.previous_arm.unsqueeze(0))
        rewards, observed = arm_rewards(abs_advantage, arm_per_sample, self.bandit.num_arms)
        self.bandit.update(rewards, observed)
        self.previous_arm[:] = self.arm_of_env

    def state_dict(self) -> dict:
        """The term's state for a checkpoint: the bandit's and the terrain's."""
        return {"bandit": self.bandit.state_dict(), "terrain": self.terrain.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore the bandit and the terrain; each env's current and previous arm become its restored tile's."""
        self.bandit.load_state_dict(state["bandit"])
        self.terrain.load_state_dict(state["terrain"])
        self.arm_of_env = self._arm_of_cell(self.terrain.levels, self.terrain.types).cpu()
        self.previous_arm = self.arm_of_env.clone()

    # Private methods.

    def _arm_of_cell(self, levels: torch.Tensor, types: torch.Tensor) -> torch.Tensor:
        if self.arms == "types":
            return types.clone()
        if self.arms == "levels":
            return levels.clone()
        return levels * self.num_types + types

    def _cell_of_arm(self, arms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n = arms.numel()
        if self.arms == "types":
            low, high = self.level_range
            levels = torch.randint(low, high + 1, (n,), generator=self._cpu_generator())
            return levels, arms
        if self.arms == "levels":
            return arms, torch.randint(0, self.num_types, (n,), generator=self._cpu_generator())
        return arms // self.num_types, arms % self.num_types

    def _cpu_generator(self) -> torch.Generator | None:
        return self.generator if self.generator.device.type == "cpu" else None
