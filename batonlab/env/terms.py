# SPDX-License-Identifier: BSD-3-Clause
"""Term contracts and term building: base classes with no-op hooks, parameters checked before any simulation."""

from __future__ import annotations

import abc
import functools
import inspect
from typing import Any, Callable

import torch


class ManagerTerm:
    """Base of class terms, built as `cls(env, **params)` and called by their manager like a function term."""

    def reset(self, env_ids: torch.Tensor) -> None:
        """Clear the state of the envs `env_ids` that start a new episode; stateless terms keep this no-op."""


class CurriculumTerm(ManagerTerm):
    """A curriculum term: `(env, env_ids) -> value | dict | None` on resets, with state saved in checkpoints."""

    def observe_advantages(self, env, abs_advantage: torch.Tensor) -> None:
        """See the last rollout's |advantage| (num_steps, num_envs); a term that learns from it overrides this."""

    def state_dict(self) -> dict:
        """The term's state for a checkpoint; empty for a stateless term."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()`'s output."""


class PrivilegeTerm(ManagerTerm):
    """Simulation-only help read from the privilege level λ (`env.privilege_manager.level`)."""

    def apply(self, env) -> None:
        """Before the physics of each control step: add forces to `env.sim.xfrc_applied` (world frame, N and N·m)."""

    def on_level_change(self, env) -> None:
        """λ changed for every env at once (evaluation); contact switches follow it now, not at the next reset."""


class ExpertTerm(ManagerTerm, abc.ABC):
    """A scripted expert (`TaskCfg.expert`): from privileged state, the actions it would take now; a Distillation
    teacher (`teacher=expert`) and a check that the task is solvable."""

    @abc.abstractmethod
    def __call__(self, env) -> torch.Tensor:
        """(num_envs, num_actions) the expert's raw actions for the current state, in the policy's action order."""


class ProgressTerm(ManagerTerm, abc.ABC):
    """The simulator's true task progress (`TaskCfg.progress`): a measurement of the state, and the progress it means,
    on its own or from where the episode started."""

    @abc.abstractmethod
    def measure(self, env) -> torch.Tensor:
        """(num_envs, k) the raw state progress is read from (distances [m], heights [m])."""

    @abc.abstractmethod
    def progress(self, measures: torch.Tensor, start: torch.Tensor | None = None) -> torch.Tensor:
        """(..., k) measurements → (...) progress in [0, 1]; with `start` (..., k), the episode's first measurement,
        progress counts from where the episode began (None: from the task's fixed scale)."""

    def __call__(self, env) -> torch.Tensor:
        """(num_envs,) progress of the current state, on the task's fixed scale."""
        return self.progress(self.measure(env))


def check_params(func: Callable, params: dict[str, Any], where: str, leading: int) -> None:
    """Fail early when `params` do not fit `func`'s signature.

    Args:
        func: The term function or class.
        params: Keyword arguments from the config.
        where: Human-readable location, e.g. "rewards['ee_tracking']".
        leading: Positional arguments the manager passes to a function term first (env, or env and
            env_ids). A class term is constructed as `cls(env, **params)` whatever the manager.
    """
    if inspect.isclass(func):
        signature = inspect.signature(func.__init__)
        positional = [None, None]  # self, env
    else:
        signature = inspect.signature(func)
        positional = [None] * leading
    try:
        signature.bind(*positional, **params)
    except TypeError as err:
        accepted = [p for p in signature.parameters if p not in ("self", "env", "env_ids")]
        raise TypeError(f"{where}: {err}; {_name(func)} accepts {accepted}") from None


def build_term(func: Callable, params: dict[str, Any], env, where: str, leading: int = 1,
               base: type[ManagerTerm] = ManagerTerm, functions: bool = True) -> ManagerTerm:
    """A term of kind `base`: a class built as `cls(env, **params)`, or a function bound to its params.

    Args:
        base: The term kind's base class; a class term must derive from it (its hooks are what the manager calls).
        functions: Whether the kind accepts plain functions (privileges do not: they act through hooks).
    """
    if inspect.isclass(func):
        if not issubclass(func, base):
            raise TypeError(f"{where}: {_name(func)} must derive from {base.__module__}.{base.__qualname__} "
                            f"(the manager calls its hooks)")
    elif not functions:
        raise TypeError(f"{where}: {_name(func)} is a function; this kind of term is a class deriving from "
                        f"{base.__module__}.{base.__qualname__}")
    check_params(func, params, where, leading)
    if inspect.isclass(func):
        return func(env, **params)
    return _bound_class(base)(func, params)


class _BoundTerm(ManagerTerm):
    """A function term with its params, so that managers treat all terms alike."""

    def __init__(self, func: Callable, params: dict[str, Any]):
        self.func = func
        self.params = params

    def __call__(self, *args):
        return self.func(*args, **self.params)


@functools.cache
def _bound_class(base: type[ManagerTerm]) -> type[ManagerTerm]:
    """The bound-function class of a term kind: `_BoundTerm` with `base`'s no-op hooks."""
    if base is ManagerTerm:
        return _BoundTerm
    return type(f"Bound{base.__name__}", (_BoundTerm, base), {})


def _name(func: Callable) -> str:
    return f"{func.__module__}.{func.__qualname__}"


def qualified_name(func: Callable) -> str:
    """`module:qualname` of a term, used in resolved configs and manifests."""
    return f"{func.__module__}:{func.__qualname__}"
