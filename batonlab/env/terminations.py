# SPDX-License-Identifier: BSD-3-Clause
"""Termination manager: failures end an episode, time-outs truncate it (the critic bootstraps)."""

from __future__ import annotations

import torch

from batonlab.env.cfg import TerminationTermCfg
from batonlab.env.terms import build_term


class TerminationManager:
    """Evaluates termination terms; the episode time limit and physics divergence are built in."""

    def __init__(self, env, cfgs: dict[str, TerminationTermCfg]):
        self.env = env
        self.cfgs = cfgs
        self.terms = {name: build_term(c.func, c.params, env, f"terminations['{name}']") for name, c in cfgs.items()}
        n = env.num_envs
        self.terminated = torch.zeros(n, dtype=torch.bool, device=env.device)
        self.truncated = torch.zeros_like(self.terminated)
        self._counts = {name: torch.zeros(n, dtype=torch.bool, device=env.device) for name in [*cfgs, "time_out", "physics_diverged"]}

    def compute(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (terminated, truncated), each bool (num_envs,)."""
        env = self.env
        time_out = env.episode_length_buf >= env.max_episode_length
        diverged = env.sim.diverged.to(env.device)
        self.terminated[:] = diverged
        self.truncated[:] = time_out & ~diverged
        self._counts["time_out"] = self.truncated.clone()
        self._counts["physics_diverged"] = diverged
        for name, term in self.terms.items():
            value = term(env).bool()
            self._counts[name] = value
            if self.cfgs[name].time_out:
                self.truncated |= value
            else:
                self.terminated |= value
        # A failure on the last step is a failure, not a time-out.
        self.truncated &= ~self.terminated
        return self.terminated, self.truncated

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        """The fraction of the reset envs each termination ended, for the log."""
        for term in self.terms.values():
            term.reset(env_ids)
        return {f"Episode_Termination/{name}": v[env_ids].float().mean() for name, v in self._counts.items()}
