# SPDX-License-Identifier: BSD-3-Clause
"""Command-range curriculum (legged_gym's `update_command_curriculum`): widen the sampled velocity
ranges once the robot tracks the current ones well.

The episode pay of one tracking reward (at its weight when the curriculum was built, so a
curriculum that rescales the weight does not move it), per second of each episode, is averaged over the
envs that reset; once per window (default: one episode length), if this mean per-second value
exceeds `fraction` of the term's weight (the most an exp-kernel term can pay), every listed range
grows by `step` on both sides, up to its `limit`. Dividing by the actual duration (legged_gym divides
by the time limit) judges how well the robot tracked while it ran: episodes cut short by a fall or
by leaving the terrain do not read as poor tracking.
"""

from __future__ import annotations

import torch
from batonlab.env.rewards import episode_pay_per_s
from batonlab.env.terms import CurriculumTerm


def should_widen(mean_reward_per_s: float, weight: float, fraction: float) -> bool:
    """True when a tracking term paid more than `fraction` of its maximum (`weight` per second)."""
    return mean_reward_per_s > fraction * weight


def widen(current: tuple[float, float], limit: tuple[float, float], step: float) -> tuple[float, float]:
    """Grow a (low, high) range by `step` on both sides, never beyond `limit`."""
    return max(limit[0], current[0] - step), min(limit[1], current[1] + step)


class CommandRangeCurriculum(CurriculumTerm):
    """Curriculum term that widens the `ranges` of a command (e.g. `BaseVelocityCommand`).

    Args:
        env: The env.
        command: Name of the command whose `ranges` dict is widened.
        reward_term: Tracking reward whose episode sums decide (e.g. "track_lin_vel_x").
        limits: Final range per key of `ranges`, e.g. {"lin_vel_x": (-1.5, 1.5)} [command units].
        step: Growth per side and update, per key [command units].
        fraction: Fraction of the reward's maximum to reach before widening [-].
        interval_s: Minimum simulated time between two decisions [s]; default one episode.
    """

    def __init__(
        self,
        env,
        command: str,
        reward_term: str,
        limits: dict[str, tuple[float, float]],
        step: dict[str, float],
        fraction: float = 0.8,
        interval_s: float | None = None,
    ):
        self.term = env.command_manager.terms[command]
        unknown = sorted(set(limits) - set(self.term.ranges))
        if unknown or set(step) != set(limits):
            raise KeyError(
                f"limits/step keys must match among {sorted(self.term.ranges)}; got {sorted(limits)}, {sorted(step)}"
            )
        if reward_term not in env.reward_manager.cfgs:
            raise KeyError(f"unknown reward term '{reward_term}'; the task has {sorted(env.reward_manager.cfgs)}")
        self.reward_term = reward_term
        self.weight = env.reward_manager.cfgs[reward_term].weight
        self.limits = {k: tuple(v) for k, v in limits.items()}
        self.step = dict(step)
        self.fraction = fraction
        self.interval_steps = round((interval_s or env.max_episode_length_s) / env.step_dt)
        self._sum = 0.0
        self._count = 0
        self._last_update_step = 0
        self.num_widenings = 0

    def __call__(self, env, env_ids: torch.Tensor) -> dict[str, float]:
        self._sum += episode_pay_per_s(env, env_ids, {self.reward_term: self.weight}).sum().item()
        self._count += len(env_ids)
        if env.common_step_counter - self._last_update_step >= self.interval_steps and self._count:
            if should_widen(self._sum / self._count, self.weight, self.fraction):
                for key, limit in self.limits.items():
                    self.term.ranges[key] = widen(self.term.ranges[key], limit, self.step[key])
                self.num_widenings += 1
            self._sum, self._count = 0.0, 0
            self._last_update_step = env.common_step_counter
        log = {"widenings": float(self.num_widenings)}
        for key in self.limits:
            log[f"{key}_low"], log[f"{key}_high"] = self.term.ranges[key]
        return log

    def state_dict(self) -> dict:
        """The term's state for a checkpoint: the moved command ranges and the number of widenings."""
        return {
            "ranges": {k: torch.tensor(self.term.ranges[k]) for k in self.limits},
            "num_widenings": self.num_widenings,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()`'s output into the command term's ranges."""
        for key, value in state["ranges"].items():
            self.term.ranges[key] = tuple(float(v) for v in value.tolist())
        self.num_widenings = int(state["num_widenings"])
