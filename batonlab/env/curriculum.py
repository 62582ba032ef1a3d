# SPDX-License-Identifier: BSD-3-Clause
"""Curriculum manager: terms updated with the envs that just reset, with saveable state."""

from __future__ import annotations

import torch

from batonlab.env.cfg import CurriculumTermCfg
from batonlab.env.terms import CurriculumTerm, build_term


class CurriculumManager:
    """Calls curriculum terms on resets and collects their logged values and state.

    With no terms it is a null object: `update` returns an empty log and the state is empty.
    """

    def __init__(self, env, cfgs: dict[str, CurriculumTermCfg]):
        self.env = env
        self.terms = {name: build_term(c.func, c.params, env, f"curriculum['{name}']", leading=2,
                                 base=CurriculumTerm) for name, c in cfgs.items()}

    def update(self, env_ids: torch.Tensor) -> dict[str, float]:
        """Call every term with the envs that just reset; their values, for the log."""
        log = {}
        for name, term in self.terms.items():
            value = term(self.env, env_ids)
            if isinstance(value, dict):
                log.update({f"Curriculum/{name}/{k}": float(v) for k, v in value.items()})
            elif value is not None:
                log[f"Curriculum/{name}"] = float(value)
        return log

    def observe_advantages(self, abs_advantage: torch.Tensor) -> None:
        """Feed the |advantage| of the last rollout's transitions (num_steps, num_envs) to the terms that use it.

        The runner calls this after computing returns; terms that learn from it (the bandit
        curriculum) override `CurriculumTerm.observe_advantages`. Rollouts are collected without gradients.
        """
        for term in self.terms.values():
            term.observe_advantages(self.env, abs_advantage)

    def state_dict(self) -> dict:
        """The terms' states for a checkpoint, by term name (stateless terms are left out)."""
        return {name: state for name, t in self.terms.items() if (state := t.state_dict())}

    def load_state_dict(self, state: dict, strict: bool = True) -> None:
        """Restore the terms' state.

        Args:
            strict: A state for a term this task lacks is an error (resuming training must continue
                the same curricula). False (playing or exporting a checkpoint) skips those states:
                a play task may drop a curriculum, e.g. to test on the final, widest commands.
        """
        unknown = sorted(set(state) - set(self.terms))
        if unknown and strict:
            raise KeyError(f"checkpoint has curriculum state for {unknown}, the task has {list(self.terms)}")
        for name, term_state in state.items():
            if name in self.terms:
                self.terms[name].load_state_dict(term_state)
