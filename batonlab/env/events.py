# SPDX-License-Identifier: BSD-3-Clause
"""Event manager: randomisation at startup, on reset, and on per-env interval timers."""

from __future__ import annotations

import torch

from batonlab.env.cfg import EventTermCfg
from batonlab.env.terms import build_term

_MODES = ("startup", "reset", "interval")


_TIMER_EPS = 1e-4
"""Timers count down in float32 steps of step_dt; this absorbs the rounding of the sum."""


class EventManager:
    """Calls `(env, env_ids, **params)` event terms by mode."""

    def __init__(self, env, cfgs: dict[str, EventTermCfg]):
        self.env = env
        for name, c in cfgs.items():
            if c.mode not in _MODES:
                raise ValueError(f"events['{name}'].mode must be one of {_MODES}, got '{c.mode}'")
        self.cfgs = cfgs
        self.terms = {name: build_term(c.func, c.params, env, f"events['{name}']", leading=2) for name, c in cfgs.items()}
        self.time_left = {
            name: torch.zeros(env.num_envs, device=env.device) for name, c in cfgs.items() if c.mode == "interval"
        }
        self.rearm_intervals(env.all_env_ids)

    def apply(self, mode: str, env_ids: torch.Tensor) -> None:
        """Fire the events of `mode` (startup or reset) for `env_ids`."""
        for name, term in self.terms.items():
            if self.cfgs[name].mode == mode and len(env_ids):
                term(self.env, env_ids)

    def update(self, dt: float) -> None:
        """Fire interval events whose per-env timer ran out."""
        for name, time_left in self.time_left.items():
            time_left -= dt
            due = (time_left <= _TIMER_EPS).nonzero().flatten()
            if due.numel():
                self.terms[name](self.env, due)
                self._rearm(name, due)

    def rearm_intervals(self, env_ids: torch.Tensor) -> None:
        """Draw fresh timers of every interval event for `env_ids`.

        Resets leave the timers running, so an env's pushes keep their own schedule across its
        episodes; a caller that makes an episode a function of its seed alone (the sim-to-sim
        `seed_episode`) redraws them after seeding the generator.
        """
        for name in self.time_left:
            self._rearm(name, env_ids)

    def _rearm(self, name: str, env_ids: torch.Tensor) -> None:
        low, high = self.cfgs[name].interval_range_s
        self.time_left[name][env_ids] = self.env.uniform(len(env_ids), low, high)

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        """Reset the event terms' state of the envs that reset (interval timers keep running)."""
        for term in self.terms.values():
            term.reset(env_ids)
        return {}
