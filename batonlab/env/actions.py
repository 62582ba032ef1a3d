# SPDX-License-Identifier: BSD-3-Clause
"""Action terms: policy output → actuator controls, joints addressed by name.

PD control runs inside MuJoCo's position actuators at the physics rate (their kp/kv are the gains
exported to the manifest); a position action only writes targets.
"""

from __future__ import annotations

import abc

import torch

from batonlab.env.cfg import ActionTermCfg


class ActionTerm(abc.ABC):
    """Base of action terms: a slice of the policy output (num_envs, action_dim) → controls, built as `cls(env, cfg)`."""

    action_type: str = ""
    """Name written to the manifest."""
    privileged: bool = False
    """Training only (virtual forces): the export and the manifest leave the term out."""
    joint_names: list[str]
    """The joints the term drives, in action order (empty for a term that drives none)."""

    @property
    @abc.abstractmethod
    def action_dim(self) -> int:
        """Width of the term's slice of the policy output."""

    @abc.abstractmethod
    def process(self, actions: torch.Tensor) -> None:
        """Take the term's raw actions (num_envs, action_dim) once per control step."""

    @abc.abstractmethod
    def apply(self, ctrl: torch.Tensor) -> None:
        """Write controls (num_envs, nu) before each physics step."""

    def reset(self, env_ids: torch.Tensor) -> None:
        """Clear the state of the envs `env_ids` that start a new episode."""

    @abc.abstractmethod
    def saturation_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(low, high) per action dim: the raw action beyond which the executed command no longer changes."""


class ActionManager:
    """Splits the policy output across action terms, in the order of the config dict.

    Privileged terms (`privileged = True`, e.g. `batonlab.privileges.virtual_forces.VirtualForceAction`)
    come last, so that the deployable policy is the first `action_dim - privileged_dim` outputs.

    Each env may apply its actions a few control steps late (`set_delay`, randomised by an event):
    `action` stays the policy's latest output, the terms receive the delayed one.
    """

    def __init__(self, env, cfgs: dict[str, ActionTermCfg]):
        if not cfgs:
            raise ValueError("a task needs at least one action term")
        for name, cfg in cfgs.items():
            if not (isinstance(cfg.cls, type) and issubclass(cfg.cls, ActionTerm)):
                raise TypeError(f"actions['{name}']: {cfg.cls!r} must be a class deriving from {__name__}.ActionTerm")
        self.terms = {name: cfg.cls(env, cfg) for name, cfg in cfgs.items()}
        privileged = [t.privileged for t in self.terms.values()]
        if privileged != sorted(privileged):
            raise ValueError(f"privileged action terms must come after all deployable ones (the export cuts them off "
                             f"the end of the action vector); the order is {list(self.terms)}")
        self.action_dim = sum(t.action_dim for t in self.terms.values())
        self.privileged_dim = sum(t.action_dim for t, p in zip(self.terms.values(), privileged) if p)
        """Trailing action dims that only exist in simulation (virtual forces); never exported."""
        self.deployable_terms = {n: t for (n, t), p in zip(self.terms.items(), privileged) if not p}
        """The action terms a robot executes, in policy order."""
        self.action = torch.zeros(env.num_envs, self.action_dim, device=env.device)
        self.prev_action = torch.zeros_like(self.action)
        self.delay_steps = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
        """Per-env action latency [control steps]; 0 applies each action in the step it is given."""
        self._history: torch.Tensor | None = None
        """(num_envs, max_delay + 1, action_dim) latest actions, newest first; allocated by `set_delay`."""

    def term_slice(self, name: str) -> slice:
        """The columns of the policy's action vector that term `name` reads."""
        if name not in self.terms:
            raise KeyError(f"unknown action term {name!r}; the task's action terms are {list(self.terms)}")
        dims = [t.action_dim for t in self.terms.values()]
        index = list(self.terms).index(name)
        return slice(sum(dims[:index]), sum(dims[:index + 1]))

    @property
    def delay_depth(self) -> int:
        """Actions kept for the delay: the largest delay set so far + 1."""
        return 1 if self._history is None else self._history.shape[1]

    def set_delay(self, env_ids: torch.Tensor, steps: torch.Tensor) -> None:
        """Set the action latency of `env_ids` to `steps` control steps (long tensor, >= 0)."""
        steps = steps.to(device=self.delay_steps.device, dtype=torch.long)
        if (steps < 0).any():
            raise ValueError("action delay must be >= 0 control steps")
        depth = int(steps.max()) + 1 if steps.numel() else 1
        if self._history is None or self._history.shape[1] < depth:
            history = torch.zeros(self.action.shape[0], depth, self.action_dim, device=self.action.device)
            if self._history is not None:
                history[:, : self._history.shape[1]] = self._history
            self._history = history
        self.delay_steps[env_ids] = steps

    def process(self, actions: torch.Tensor) -> None:
        """Take the policy output (num_envs, action_dim) once per control step, each term its slice (after the delay)."""
        if actions.shape[-1] != self.action_dim:
            raise ValueError(f"expected actions of size {self.action_dim}, got shape {tuple(actions.shape)}")
        self.prev_action[:] = self.action
        self.action[:] = actions
        if self._history is not None:
            self._history[:] = torch.roll(self._history, shifts=1, dims=1)
            self._history[:, 0] = actions
            actions = self._history[torch.arange(actions.shape[0], device=actions.device), self.delay_steps]
        start = 0
        for term in self.terms.values():
            term.process(actions[:, start : start + term.action_dim])
            start += term.action_dim

    def apply(self, ctrl: torch.Tensor) -> None:
        """Let every term write its controls into `ctrl` (num_envs, nu) before a physics step."""
        for term in self.terms.values():
            term.apply(ctrl)

    def saturation_bounds(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(low, high) per action dim: the raw action beyond which the executed command no longer changes."""
        bounds = [t.saturation_bounds() for t in self.terms.values()]
        return torch.cat([b[0] for b in bounds]), torch.cat([b[1] for b in bounds])

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        """Zero the actions, their history and the terms' state of the envs that reset."""
        self.action[env_ids] = 0.0
        self.prev_action[env_ids] = 0.0
        if self._history is not None:
            self._history[env_ids] = 0.0
        for term in self.terms.values():
            term.reset(env_ids)
        return {}
