# SPDX-License-Identifier: BSD-3-Clause
"""The privilege schedule: λ starts high and steps down each time the policy succeeds often enough.

The success rate is taken over a window of the last `window_episodes` finished episodes of all
envs. When the window is full and its rate passes `success_threshold`, λ drops by `step` and the
window starts over: the next step down needs evidence gathered at the new level, never the old one.
A policy that stops succeeding keeps its level; λ never rises (help that returns would be learned
as something to wait for).
"""

from __future__ import annotations

import torch
from batonlab.env.terms import CurriculumTerm


class PrivilegeSchedule(CurriculumTerm):
    """Curriculum term lowering `env.privilege_manager.level`.

    Args:
        success_threshold: Windowed success rate that earns the next step down.
        window_episodes: Finished episodes in the window.
        step: Decrease of λ per step down.
        min_level: λ never goes below this (0: the schedule ends without help).
    """

    sets_privilege_level = True
    """Marks a term that drives λ: a distillation (which runs at λ = 0) drops it."""

    def __init__(self, env, success_threshold: float = 0.8, window_episodes: int = 1024, step: float = 0.25,
                 min_level: float = 0.0):
        if not 0.0 < success_threshold <= 1.0 or window_episodes < 1 or step <= 0.0:
            raise ValueError("PrivilegeSchedule: need 0 < success_threshold <= 1, window_episodes >= 1, step > 0")
        if not env.privilege_manager.active:
            raise ValueError("PrivilegeSchedule: this task has no privileges (TaskCfg.privileges or privileged actions) to fade")
        self.env = env
        self.success_threshold, self.step, self.min_level = float(success_threshold), float(step), float(min_level)
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
        if self.count >= self.window.numel() and self.window_rate >= self.success_threshold and manager.level > self.min_level:
            manager.set_level(max(self.min_level, manager.level - self.step))
            self.count = 0
        return {"level": manager.level, "success_window": self.window_rate}

    def state_dict(self) -> dict:
        """The term's state for a checkpoint: the success window, its count and the privilege level."""
        return {"window": self.window.cpu().clone(), "count": self.count, "level": self.env.privilege_manager.level}

    def load_state_dict(self, state: dict) -> None:
        """Restore the success window, its count and the privilege level."""
        self.window[:] = state["window"].to(self.window.device)
        self.count = int(state["count"])
        self.env.privilege_manager.set_level(float(state["level"]))
