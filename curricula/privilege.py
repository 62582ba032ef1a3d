# SPDX-License-Identifier: BSD-3-Clause
"""The privilege schedule: λ starts high, steps down each time the policy succeeds often enough, and
reaches 0 by a deadline.

The success rate is taken over a window of the last `window_episodes` finished episodes of all
envs. When the window is full and its rate passes `success_threshold`, λ drops by the current step
and the window starts over: the next step down needs evidence gathered at the new level, never the
old one. The step adapts: when the first full window after a step down succeeds less than the window
that earned it (by more than `drop_tolerance`), the step that follows is halved, down to `min_step`.
A deadline bounds the whole fade: λ never exceeds a ceiling that falls linearly from the start level
to 0 at `zero_by_step` control steps, so a policy that stops earning steps still ends its training
without help (evidence: docs/PRIVILEGES.md). λ never rises (help that returns would be learned as
something to wait for).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from batonlab.env.terms import CurriculumTerm


@dataclass
class ScheduleState:
    """What the rule remembers between windows."""

    level: float
    """λ."""
    step: float
    """The next step down of λ."""
    earned_rate: float | None = None
    """Window rate that earned the last step down, until the first full window after it is judged."""


def schedule_rule(state: ScheduleState, window_rate: float | None, ceiling: float, success_threshold: float,
                  min_step: float, drop_tolerance: float, min_level: float = 0.0) -> bool:
    """Advance `state` in place by one judgement; returns whether the window must start over.

    Args:
        window_rate: Success rate of a full window, or None while the window is filling.
        ceiling: The deadline's bound on λ now (1 → 0 over the fade).
        success_threshold: Window rate that earns a step down.
        min_step: The step is never halved below this.
        drop_tolerance: A fall of the window rate after a step down larger than this halves the step.
        min_level: λ never goes below this.
    """
    restart = False
    if window_rate is not None:
        if state.earned_rate is not None:
            if window_rate < state.earned_rate - drop_tolerance:
                state.step = max(min_step, state.step / 2)
            state.earned_rate = None
        if window_rate >= success_threshold and state.level > min_level:
            state.level = max(min_level, state.level - state.step)
            state.earned_rate = window_rate
            restart = True
    if state.level > ceiling:
        state.level = max(min_level, ceiling)
    return restart


def deadline_ceiling(start_level: float, steps: int, zero_by_step: int | None) -> float:
    """λ's upper bound after `steps` control steps: `start_level` falling linearly to 0 at `zero_by_step` (None: no bound)."""
    if zero_by_step is None:
        return start_level
    return start_level * max(0.0, 1.0 - steps / zero_by_step)


class PrivilegeSchedule(CurriculumTerm):
    """Curriculum term lowering `env.privilege_manager.level`.

    Args:
        success_threshold: Windowed success rate that earns the next step down.
        window_episodes: Finished episodes in the window.
        step: First decrease of λ per step down.
        min_step: The adaptive step is never halved below this (default: `step`, no adaptation).
        drop_tolerance: A window rate after a step down lower than the one that earned it by more
            than this halves the next step.
        zero_by_step: Control steps (per env, since training began) by which λ is 0 whatever the
            success; None keeps λ where success leaves it.
        min_level: λ never goes below this (0: the schedule ends without help).
    """

    sets_privilege_level = True
    """Marks a term that drives λ: a distillation (which runs at λ = 0) drops it."""

    def __init__(self, env, success_threshold: float = 0.8, window_episodes: int = 1024, step: float = 0.25,
                 min_step: float | None = None, drop_tolerance: float = 0.1, zero_by_step: int | None = None,
                 min_level: float = 0.0):
        min_step = step if min_step is None else min_step
        if not 0.0 < success_threshold <= 1.0 or window_episodes < 1 or step <= 0.0 or not 0.0 < min_step <= step:
            raise ValueError("PrivilegeSchedule: need 0 < success_threshold <= 1, window_episodes >= 1, step > 0, "
                             "0 < min_step <= step")
        if zero_by_step is not None and zero_by_step < 1:
            raise ValueError(f"PrivilegeSchedule: zero_by_step={zero_by_step} must be >= 1 control step (or None)")
        if not env.privilege_manager.active:
            raise ValueError("PrivilegeSchedule: this task has no privileges (TaskCfg.privileges or privileged actions) to fade")
        self.env = env
        self.success_threshold, self.min_level = float(success_threshold), float(min_level)
        self.min_step, self.drop_tolerance, self.zero_by_step = float(min_step), float(drop_tolerance), zero_by_step
        self.start_level = env.privilege_manager.level
        self.state = ScheduleState(level=self.start_level, step=float(step))
        self.window = torch.zeros(window_episodes, device=env.device)
        self.count = 0
        """Episodes recorded since the last step down (the window is full when it reaches its size)."""

    @property
    def window_rate(self) -> float:
        """Success rate of the episodes in the window (0 while it is empty)."""
        n = min(self.count, self.window.numel())
        return float(self.window[:n].mean()) if n else 0.0

    def __call__(self, env, env_ids: torch.Tensor) -> dict[str, float]:
        success = env.extras.get("success")
        if success is not None and len(env_ids):
            outcomes = success[env_ids].float()[-self.window.numel():]
            slots = (self.count + torch.arange(len(outcomes), device=outcomes.device)) % self.window.numel()
            self.window[slots] = outcomes
            self.count += len(outcomes)
        manager = env.privilege_manager
        self.state.level = manager.level
        full = self.window_rate if self.count >= self.window.numel() else None
        ceiling = deadline_ceiling(self.start_level, env.common_step_counter, self.zero_by_step)  # resumed with checkpoints
        if schedule_rule(self.state, full, ceiling, self.success_threshold, self.min_step, self.drop_tolerance,
                         self.min_level):
            self.count = 0
        if self.state.level != manager.level:
            manager.set_level(self.state.level)
        return {"level": manager.level, "success_window": self.window_rate, "step": self.state.step,
                "ceiling": ceiling}

    def state_dict(self) -> dict:
        """The term's state for a checkpoint: the success window, the rule's memory and λ (the deadline's
        clock, `env.common_step_counter`, is saved with the env's training state)."""
        return {"window": self.window.cpu().clone(), "count": self.count, "level": self.env.privilege_manager.level,
                "step": self.state.step, "earned_rate": self.state.earned_rate,
                "start_level": self.start_level}

    def load_state_dict(self, state: dict) -> None:
        """Restore the success window, the rule's memory and λ (checkpoints before the adaptive rule hold
        only the window, its count and λ)."""
        self.window[:] = state["window"].to(self.window.device)
        self.count = int(state["count"])
        self.state.step = float(state.get("step", self.state.step))
        self.state.earned_rate = state.get("earned_rate")
        self.start_level = float(state.get("start_level", self.start_level))
        self.env.privilege_manager.set_level(float(state["level"]))
