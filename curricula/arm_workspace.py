# SPDX-License-Identifier: BSD-3-Clause
"""Arm-constrained target curriculum (after the arm-workspace curriculum of wheel-legged
loco-manipulation work): end-effector targets start near the stowed pose and spread out over the
arm's workspace as the policy learns to reach them.

A whole-body policy asked to reach anywhere from the first iteration mostly learns to fall: far
targets pull the base off balance long before the arm can reach them. So the target command's
sampling ranges (spherical coordinates radius, pitch, yaw around the shoulder) start as small spans
around the stowed end-effector pose and widen by a step per key toward their final limits once the
arm tracks well; when tracking collapses they can narrow back, never below the start spans.

Tracking is judged as in `CommandRangeCurriculum`: the episode pay of the listed arm-tracking terms
per second, over the sum of the terms' weights (exp-kernel terms pay at most their weight per second,
so 1.0 is perfect tracking), averaged over the envs that reset in a decision window (default one
episode of simulated time). The pay counts each term at its weight when the curriculum was built
(unweighted episode sums), so a reward balance that rescales the weights (`RewardBalanceCurriculum`),
even mid-episode, does not move the score.
"""

from __future__ import annotations

import torch
from batonlab.env.rewards import episode_pay_per_s
from batonlab.env.terms import CurriculumTerm

WIDEN, HOLD, NARROW = 1, 0, -1
"""Decisions of `workspace_decision`."""


def workspace_decision(score: float, fraction: float, narrow_fraction: float | None) -> int:
    """WIDEN when the normalised tracking score (1.0 = perfect) exceeds `fraction`, NARROW when it is
    below `narrow_fraction` (None: never), else HOLD."""
    if score > fraction:
        return WIDEN
    if narrow_fraction is not None and score < narrow_fraction:
        return NARROW
    return HOLD


def step_range(
    current: tuple[float, float],
    start: tuple[float, float],
    limit: tuple[float, float],
    step: float,
    decision: int,
) -> tuple[float, float]:
    """Move a (low, high) range by `step` per side: out toward `limit` (WIDEN), back in toward
    `start` (NARROW), or not at all (HOLD). It never leaves [limit] nor shrinks inside [start]."""
    low, high = current
    if decision == WIDEN:
        return max(limit[0], low - step), min(limit[1], high + step)
    if decision == NARROW:
        return min(start[0], low + step), max(start[1], high - step)
    return low, high


def workspace_progress(
    ranges: dict[str, tuple[float, float]],
    start: dict[str, tuple[float, float]],
    limits: dict[str, tuple[float, float]],
) -> float:
    """How far the ranges have grown from the start spans to the limits, in [0, 1]: per key the
    grown width over the width there is to grow (a key with nothing to grow counts as done),
    averaged over the keys."""
    fractions = []
    for key, (low, high) in ranges.items():
        room = (limits[key][1] - limits[key][0]) - (start[key][1] - start[key][0])
        grown = (high - low) - (start[key][1] - start[key][0])
        fractions.append(1.0 if room <= 0 else min(1.0, max(0.0, grown / room)))
    return sum(fractions) / len(fractions) if fractions else 1.0


def start_ranges(
    stowed: dict[str, float], start_span: dict[str, float], limits: dict[str, tuple[float, float]]
) -> dict[str, tuple[float, float]]:
    """The start spans: `stowed ± start_span` per key, inside the limits."""
    return {
        key: (max(limits[key][0], stowed[key] - span), min(limits[key][1], stowed[key] + span))
        for key, span in start_span.items()
    }


class ArmWorkspaceCurriculum(CurriculumTerm):
    """Curriculum term widening an end-effector target command's `ranges` from the stowed pose.

    The command (e.g. `EndEffectorTargetCommand`) must expose a live dict `ranges` ({key: (lo, hi)})
    and `stowed` ({key: value}), in the same units (radius [m], pitch and yaw [rad]). On
    construction the listed keys of `ranges` are set to the start spans.

    Args:
        env: The env.
        command: Name of the end-effector target command.
        reward_terms: Arm-tracking reward terms whose episode sums decide (e.g. ("ee_track",)); their
            weights must be positive (exp kernels paying at most their weight per second).
        limits: Final range per key, e.g. {"radius": (0.25, 0.65), "pitch": (-1.0, 1.2), "yaw": (-1.5, 1.5)}
            [m, rad, rad]; each must contain the stowed value.
        start_span: Half-width of the start range around the stowed value per key, e.g.
            {"radius": 0.03, "pitch": 0.1, "yaw": 0.1} [m, rad, rad].
        step: Growth (and shrink) per side and decision, per key [m, rad, rad].
        fraction: Normalised tracking score to exceed before widening [-] (1.0 = perfect).
        narrow_fraction: Narrow back by a step below this score [-]; None never narrows.
        interval_s: Minimum simulated time between two decisions [s]; default one episode.
    """

    def __init__(
        self,
        env,
        command: str,
        reward_terms: list[str] | tuple[str, ...],
        limits: dict[str, tuple[float, float]],
        start_span: dict[str, float],
        step: dict[str, float],
        fraction: float = 0.8,
        narrow_fraction: float | None = None,
        interval_s: float | None = None,
    ):
        if command not in env.command_manager.terms:
            raise KeyError(f"unknown command '{command}'; the task has {sorted(env.command_manager.terms)}")
        self.term = env.command_manager.terms[command]
        for attribute in ("ranges", "stowed"):
            if not hasattr(self.term, attribute):
                raise TypeError(f"command '{command}' ({type(self.term).__name__}) has no '{attribute}'")
        valid = sorted(set(self.term.ranges) & set(self.term.stowed))
        if set(limits) - set(valid) or set(start_span) != set(limits) or set(step) != set(limits):
            raise KeyError(
                f"limits/start_span/step keys must match among {valid}; "
                f"got {sorted(limits)}, {sorted(start_span)}, {sorted(step)}"
            )
        reward_terms = list(reward_terms)
        unknown = sorted(set(reward_terms) - set(env.reward_manager.cfgs))
        if unknown or not reward_terms:
            raise KeyError(f"unknown reward terms {unknown}; the task has {sorted(env.reward_manager.cfgs)}")
        if any(env.reward_manager.cfgs[name].weight <= 0 for name in reward_terms):
            raise ValueError(f"reward terms {reward_terms} must have positive weights to be normalised")
        if narrow_fraction is not None and narrow_fraction >= fraction:
            raise ValueError(f"need narrow_fraction < fraction, got {narrow_fraction} >= {fraction}")
        self.limits = {k: (float(v[0]), float(v[1])) for k, v in limits.items()}
        stowed = {k: float(self.term.stowed[k]) for k in self.limits}
        outside = {k: v for k, v in stowed.items() if not self.limits[k][0] <= v <= self.limits[k][1]}
        if outside:
            raise ValueError(f"stowed values {outside} lie outside the limits {self.limits}")
        self.start = start_ranges(stowed, start_span, self.limits)
        self.step = {k: float(v) for k, v in step.items()}
        self.weights = {name: float(env.reward_manager.cfgs[name].weight) for name in reward_terms}
        """Weight each tracking term is judged at: its weight when the curriculum was built [-]."""
        self.fraction = fraction
        self.narrow_fraction = narrow_fraction
        self.interval_steps = round((interval_s or env.max_episode_length_s) / env.step_dt)
        self.term.ranges.update(self.start)
        self._sum = 0.0
        self._count = 0
        self._last_update_step = env.common_step_counter
        self.score = 0.0
        """Normalised tracking score of the window so far (of the last decision right after one) [-]."""
        self.num_widenings = 0
        self.num_narrowings = 0

    def __call__(self, env, env_ids: torch.Tensor) -> dict[str, float]:
        # Envs reset before they took a step (a full `reset()`) have no episode to judge.
        judged = env_ids[env.episode_length_buf[env_ids] > 0]
        if len(judged):
            pay_per_s = episode_pay_per_s(env, judged, self.weights)
            self._sum += pay_per_s.sum().item() / sum(self.weights.values())
            self._count += len(judged)
            self.score = self._sum / self._count
        if env.common_step_counter - self._last_update_step >= self.interval_steps and self._count:
            decision = workspace_decision(self.score, self.fraction, self.narrow_fraction)
            for key, limit in self.limits.items():
                self.term.ranges[key] = step_range(self.term.ranges[key], self.start[key], limit, self.step[key], decision)
            self.num_widenings += int(decision == WIDEN)
            self.num_narrowings += int(decision == NARROW)
            self._sum, self._count = 0.0, 0
            self._last_update_step = env.common_step_counter
        log = {}
        for key in self.limits:
            log[f"{key}_low"], log[f"{key}_high"] = self.term.ranges[key]
        log["score"] = self.score
        log["widenings"] = float(self.num_widenings)
        log["narrowings"] = float(self.num_narrowings)
        log["progress"] = self.progress
        return log

    @property
    def progress(self) -> float:
        """Fraction of the way from the start spans to the limits [0, 1]."""
        return workspace_progress({k: self.term.ranges[k] for k in self.limits}, self.start, self.limits)

    def state_dict(self) -> dict:
        """The term's state for a checkpoint: the moved ranges, widening/narrowing counts, score, last update step."""
        return {
            "ranges": {k: torch.tensor(self.term.ranges[k], dtype=torch.float64) for k in self.limits},
            "num_widenings": self.num_widenings,
            "num_narrowings": self.num_narrowings,
            "score": self.score,
            "last_update_step": self._last_update_step,
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()`'s output; a range this curriculum does not move is a KeyError."""
        for key, value in state["ranges"].items():
            if key not in self.limits:
                raise KeyError(f"checkpoint has a range for '{key}', this curriculum moves {sorted(self.limits)}")
            self.term.ranges[key] = tuple(float(v) for v in value.tolist())
        self.num_widenings = int(state["num_widenings"])
        self.num_narrowings = int(state["num_narrowings"])
        self.score = float(state["score"])
        self._last_update_step = int(state["last_update_step"])
