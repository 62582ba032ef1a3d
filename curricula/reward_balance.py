# SPDX-License-Identifier: BSD-3-Clause
"""Reward-aware curriculum: rebalance the weights of reward groups (e.g. base locomotion vs. arm
tracking) toward whichever the policy is doing worse at.

A whole-body policy trained on a fixed sum of locomotion and manipulation rewards tends to settle on
the easier objective and leave the other at a poor local optimum (stand still and reach, or drive
and ignore the target). Each group's normalised performance p_g in [0, 1] (the per-second episode
sums of its terms over the sum of its initial positive weights; 1.0 = every tracking term paid its
maximum) is smoothed by an EMA over decision windows; every window the group weights are rescaled
from their initial values by

    s_g ∝ (1 − p_g + eps)^alpha,    mean_g s_g = 1,    min_scale <= s_g <= max_scale,

so the weaker group gets more weight, the total stays that of the task's weights, and no group is
ever switched off.
"""

from __future__ import annotations

import torch
from batonlab.env.rewards import episode_pay_per_s
from batonlab.env.terms import CurriculumTerm


def balance_scales(
    performance: torch.Tensor, alpha: float = 1.0, eps: float = 0.05, min_scale: float = 0.5, max_scale: float = 2.0
) -> torch.Tensor:
    """Weight scales (G,) from group performances (G,) in [0, 1]: proportional to
    (1 − p + eps)^alpha, averaging 1, inside [min_scale, max_scale].

    The scales are `clamp(c * (1 − p + eps)^alpha, min_scale, max_scale)` with the one factor c that
    makes them average 1 (found by bisection: the mean grows monotonically with c), so scales at a
    bound are held there and the others share the rest in proportion, whenever the bounds allow a
    mean of 1 (min_scale <= 1 <= max_scale).
    """
    raw = (1.0 - performance.double().clamp(0.0, 1.0) + eps).pow(alpha).clamp(min=1e-12)
    low, high = 0.0, max_scale / raw.min().item()  # mean min_scale at c = 0, max_scale at c = high
    for _ in range(100):
        c = 0.5 * (low + high)
        if (c * raw).clamp(min_scale, max_scale).mean().item() < 1.0:
            low = c
        else:
            high = c
    return (0.5 * (low + high) * raw).clamp(min_scale, max_scale).to(performance.dtype)


class RewardBalanceCurriculum(CurriculumTerm):
    """Curriculum term rescaling the weights of named groups of reward terms by their performance.

    Every term of a group gets `weight = initial weight * s_g`, penalties included, written to
    `env.reward_manager.cfgs[name].weight` (read at every step). A group's performance counts each
    term at its initial weight (unweighted episode sums), so rescaling, even mid-episode, does not
    move p_g by itself; penalties lower it; it is clamped to [0, 1].

    Args:
        env: The env.
        groups: Reward term names per group, e.g. {"base": ["track_lin_vel_x", "track_ang_vel_z"],
            "arm": ["ee_track"]}; at least two disjoint groups, each with a positive initial weight.
        alpha: Exponent of (1 − p + eps); larger moves more weight to the weaker group [-].
        eps: Keeps a group that tracks perfectly from losing all its weight [-].
        min_scale, max_scale: Bounds of each scale [-] (min_scale <= 1 <= max_scale).
        ema_rate: Weight of each new window in the smoothed performance (1.0: no smoothing) [-].
        interval_s: Minimum simulated time between two rescalings [s]; default one episode.
    """

    def __init__(
        self,
        env,
        groups: dict[str, list[str] | tuple[str, ...]],
        alpha: float = 1.0,
        eps: float = 0.05,
        min_scale: float = 0.5,
        max_scale: float = 2.0,
        ema_rate: float = 0.5,
        interval_s: float | None = None,
    ):
        cfgs = env.reward_manager.cfgs
        if len(groups) < 2:
            raise ValueError(f"need at least two reward groups to balance, got {sorted(groups)}")
        names = [name for terms in groups.values() for name in terms]
        unknown = sorted(set(names) - set(cfgs))
        if unknown:
            raise KeyError(f"unknown reward terms {unknown}; the task has {sorted(cfgs)}")
        if len(set(names)) != len(names):
            raise ValueError(f"reward groups must not share terms: {dict(groups)}")
        if not 0.0 < min_scale <= 1.0 <= max_scale:
            raise ValueError(f"need 0 < min_scale <= 1 <= max_scale, got {min_scale}, {max_scale}")
        if eps <= 0.0:
            raise ValueError(f"need eps > 0 (a perfect group keeps some weight), got {eps}")
        if not 0.0 < ema_rate <= 1.0:
            raise ValueError(f"need 0 < ema_rate <= 1, got {ema_rate}")
        self.groups = {group: list(terms) for group, terms in groups.items()}
        self.initial = {name: float(cfgs[name].weight) for name in names}
        self.max_per_s = {g: sum(max(0.0, self.initial[n]) for n in terms) for g, terms in self.groups.items()}
        empty = sorted(g for g, total in self.max_per_s.items() if total <= 0.0)
        if empty:
            raise ValueError(f"reward groups {empty} have no positive weight to normalise by")
        self.alpha, self.eps = alpha, eps
        self.min_scale, self.max_scale = min_scale, max_scale
        self.ema_rate = ema_rate
        self.interval_steps = round((interval_s or env.max_episode_length_s) / env.step_dt)
        num_groups = len(self.groups)
        self.performance = torch.zeros(num_groups, dtype=torch.float64)
        """Smoothed normalised performance p_g per group [-]."""
        self.scales = torch.ones(num_groups, dtype=torch.float64)
        """Weight scale s_g per group [-]."""
        self.num_updates = 0
        self._sum = torch.zeros(num_groups, dtype=torch.float64)
        self._count = 0
        self._last_update_step = env.common_step_counter
        self._cfgs = cfgs

    def __call__(self, env, env_ids: torch.Tensor) -> dict[str, float]:
        # Envs reset before they took a step (a full `reset()`) have no episode to judge.
        judged = env_ids[env.episode_length_buf[env_ids] > 0]
        if len(judged):
            for g, (group, terms) in enumerate(self.groups.items()):
                per_s = episode_pay_per_s(env, judged, {name: self.initial[name] for name in terms})
                self._sum[g] += per_s.sum().item() / self.max_per_s[group]
            self._count += len(judged)
        if env.common_step_counter - self._last_update_step >= self.interval_steps and self._count:
            window = (self._sum / self._count).clamp(0.0, 1.0)
            rate = self.ema_rate if self.num_updates else 1.0  # the first window sets the estimate
            self.performance += rate * (window - self.performance)
            self.scales = balance_scales(self.performance, self.alpha, self.eps, self.min_scale, self.max_scale)
            self._write_weights()
            self.num_updates += 1
            self._sum.zero_()
            self._count = 0
            self._last_update_step = env.common_step_counter
        log = {}
        for g, group in enumerate(self.groups):
            log[f"p_{group}"] = self.performance[g].item()
            log[f"scale_{group}"] = self.scales[g].item()
        return log

    def _write_weights(self) -> None:
        for g, terms in enumerate(self.groups.values()):
            for name in terms:
                self._cfgs[name].weight = self.initial[name] * self.scales[g].item()

    def state_dict(self) -> dict:
        """The term's state for a checkpoint: the groups, their performance and scales, the update count and step."""
        return {
            "groups": list(self.groups),
            "performance": self.performance.clone(),
            "scales": self.scales.clone(),
            "num_updates": self.num_updates,
            "last_update_step": self._last_update_step,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()`'s output of the same groups and write the restored weights."""
        if list(state["groups"]) != list(self.groups):
            raise KeyError(f"checkpoint balances groups {list(state['groups'])}, this curriculum {list(self.groups)}")
        self.performance = state["performance"].to(torch.float64).cpu().clone()
        self.scales = state["scales"].to(torch.float64).cpu().clone()
        self.num_updates = int(state["num_updates"])
        self._last_update_step = int(state["last_update_step"])
        self._write_weights()
