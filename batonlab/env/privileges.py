# SPDX-License-Identifier: BSD-3-Clause
"""Privileges: help that exists only in simulation, faded by one level λ ∈ [0, 1].

A policy that must push a box out of an ungraspable pose and then lift it rarely stumbles on the
whole sequence from a sparse reward. Privileged training lets it: virtual forces move the object
and contacts that would block the gripper are switched off while λ is high, and a schedule
(`batonlab.curricula.privilege`) lowers λ as the policy succeeds, until it succeeds without help.
Evaluation and export always run at λ = 0.

λ is one number for all envs (the schedule follows the population's success rate). Forces follow it
at once; contact switches follow it when each env resets, so that a contact that comes back on does
not find a finger already deep inside the table.
"""

from __future__ import annotations

import torch

from batonlab.env.cfg import PrivilegeTermCfg
from batonlab.env.terms import PrivilegeTerm, build_term


class PrivilegeManager:
    """The privilege level and the terms that read it.

    Each control step, `apply` clears `xfrc_applied` (batonlab writes Cartesian forces only through
    privileges and privileged actions) and lets each term add its forces; the action manager's
    privileged actions (`VirtualForceAction`) add theirs afterwards.
    """

    def __init__(self, env, cfgs: dict[str, PrivilegeTermCfg], level: float, privileged_actions: bool = False):
        """Args:
            privileged_actions: Whether the action manager has privileged actions, which read λ too.
        """
        self.env = env
        self.privileged_actions = privileged_actions
        self.level = float(level) if cfgs or privileged_actions else 0.0
        """Current privilege level λ ∈ [0, 1]; 0 when the task has no privileges."""
        self.terms = {name: build_term(c.func, c.params, env, f"privileges['{name}']", base=PrivilegeTerm,
                                 functions=False) for name, c in cfgs.items()}

    @property
    def active(self) -> bool:
        """Whether anything in the env depends on λ (privilege terms or privileged actions)."""
        return bool(self.terms) or self.privileged_actions

    def set_level(self, level: float, now: bool = False) -> None:
        """Set λ (clamped to [0, 1]).

        Args:
            now: Apply it to every env at once (evaluation); otherwise contact switches follow at
                each env's next reset.
        """
        self.level = min(1.0, max(0.0, float(level)))
        if now:
            for term in self.terms.values():
                term.on_level_change(self.env)

    def apply(self) -> None:
        """Before the physics of a control step: clear the applied forces, then let terms add theirs."""
        self.env.sim.xfrc_applied.zero_()
        for term in self.terms.values():
            term.apply(self.env)

    def reset(self, env_ids: torch.Tensor) -> None:
        """Envs that reset take the current level (contact switches)."""
        for term in self.terms.values():
            term.reset(env_ids)

    def state_dict(self) -> dict:
        """λ, for a checkpoint."""
        return {"level": self.level}

    def load_state_dict(self, state: dict) -> None:
        """Restore λ (contact switches follow at each env's next reset)."""
        self.set_level(state["level"])
