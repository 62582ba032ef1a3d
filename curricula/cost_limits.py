# SPDX-License-Identifier: BSD-3-Clause
"""Constraint-limit schedule: cost limits start loose and tighten to the task's limits.

Constrained RL (P3O, PPO-Lagrangian) with tight limits from the first iteration pushes a random
policy into the safest behaviour it finds (a robot that stands still violates nothing) before it has
learnt the task. Starting with loose limits and tightening them over training lets the policy learn
the task first and then the constraints, as in the constraint curricula of constrained locomotion
work. The final limits are the task's (`CostTermCfg.limit`, read from `env.cost_manager.limits` when
the term is built); the schedule runs on `env.common_step_counter` (control steps, restored by
checkpoints) and writes `env.cost_manager.limits` in place, so whoever holds that tensor sees the
new limits.
"""

from __future__ import annotations

import torch
from batonlab.env.terms import CurriculumTerm

SHAPES = ("linear", "geometric")


def scheduled_limits(
    start: torch.Tensor, final: torch.Tensor, step: int, duration_steps: int, shape: str = "linear"
) -> torch.Tensor:
    """Limits after `step` of `duration_steps` control steps, moving from `start` to `final`.

    Linear moves by equal amounts per step; geometric by equal ratios (start and final > 0), which
    spends more of the schedule near the tight end, where a small change in a limit matters more.
    From `duration_steps` on the limits are `final`.
    """
    if shape not in SHAPES:
        raise ValueError(f"unknown shape '{shape}', expected one of {SHAPES}")
    x = 1.0 if duration_steps <= 0 else min(1.0, max(0.0, step / duration_steps))
    if shape == "linear":
        return start + (final - start) * x
    return start * (final / start) ** x


class CostLimitSchedule(CurriculumTerm):
    """Curriculum term tightening cost limits from `start` to the task's limits over training.

    Costs not named in `start` keep their limits. The schedule never moves back: a step counter
    that goes down (an env rebuilt without the checkpoint's counter) keeps the tightest limits reached.

    Args:
        env: The env (its `cost_manager.limits` at construction are the final limits).
        start: Starting limit per cost name, at least the final one (looser) [cost units per step].
        duration_steps: Control steps over which the limits reach their final values [steps].
        shape: "linear" or "geometric" (needs positive start and final limits).
    """

    def __init__(self, env, start: dict[str, float], duration_steps: int, shape: str = "linear"):
        names = list(env.cost_manager.names)
        unknown = sorted(set(start) - set(names))
        if unknown or not start:
            raise KeyError(f"unknown cost terms {unknown}; the task has {names}")
        if shape not in SHAPES:
            raise ValueError(f"unknown shape '{shape}', expected one of {SHAPES}")
        if duration_steps < 0:
            raise ValueError(f"need duration_steps >= 0, got {duration_steps}")
        self.names = list(start)
        self.limits = env.cost_manager.limits
        self.index = torch.tensor([names.index(n) for n in self.names], device=self.limits.device)
        self.final = self.limits[self.index].clone().to(torch.float64)
        """Final limit per scheduled cost (the task's)."""
        self.start = torch.tensor([float(start[n]) for n in self.names], dtype=torch.float64, device=self.final.device)
        """Starting limit per scheduled cost."""
        tighter = [n for n, s, f in zip(self.names, self.start.tolist(), self.final.tolist()) if s < f]
        if tighter:
            raise ValueError(f"start limits of {tighter} are tighter than the final limits {self.final.tolist()}")
        if shape == "geometric" and bool((self.start <= 0).any() or (self.final <= 0).any()):
            raise ValueError(f"a geometric schedule needs positive limits; got start {start}, final {self.final.tolist()}")
        self.duration_steps = int(duration_steps)
        self.shape = shape
        self.step = 0
        """Control step of the limits in force [steps]."""
        self._all_names = names
        self._apply(env.common_step_counter)

    def __call__(self, env, env_ids: torch.Tensor) -> dict[str, float]:
        self._apply(env.common_step_counter)
        log = {f"limit_{name}": value for name, value in zip(self._all_names, self.limits.tolist())}
        log["progress"] = 1.0 if self.duration_steps == 0 else min(1.0, self.step / self.duration_steps)
        return log

    def _apply(self, step: int) -> None:
        self.step = max(self.step, int(step))
        values = scheduled_limits(self.start, self.final, self.step, self.duration_steps, self.shape)
        self.limits[self.index] = values.to(self.limits.dtype)

    def state_dict(self) -> dict:
        """The term's state for a checkpoint: the schedule's step and the names of its costs."""
        return {"step": self.step, "names": list(self.names)}

    def load_state_dict(self, state: dict) -> None:
        """Set the limits to the checkpoint's step of the schedule; a checkpoint of other costs is a KeyError."""
        if list(state["names"]) != self.names:
            raise KeyError(f"checkpoint schedules costs {list(state['names'])}, this schedule {self.names}")
        self.step = 0
        self._apply(int(state["step"]))
