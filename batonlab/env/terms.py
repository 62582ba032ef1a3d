# SPDX-License-Identifier: BSD-3-Clause
"""Building terms from their configs: resolve classes, check parameters before any simulation."""

from __future__ import annotations

import inspect
from typing import Any, Callable


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


def build_term(func: Callable, params: dict[str, Any], env, where: str, leading: int = 1) -> Callable:
    """Instantiate class-based terms (`cls(env, **params)`); return plain functions bound to params."""
    check_params(func, params, where, leading)
    if inspect.isclass(func):
        return func(env, **params)
    return _BoundTerm(func, params)


class _BoundTerm:
    """A function term with its params; `reset` is a no-op so managers can treat all terms alike."""

    def __init__(self, func: Callable, params: dict[str, Any]):
        self.func = func
        self.params = params

    def __call__(self, *args):
        return self.func(*args, **self.params)

    def reset(self, env_ids) -> None:
        pass


def stateful_terms(terms: dict[str, Any]) -> list[Any]:
    """The terms with state to reset (class terms with a `reset`); function terms have none."""
    return [t for t in terms.values() if not isinstance(t, _BoundTerm) and getattr(t, "reset", None) is not None]


def reset_term(term: Any, env_ids) -> None:
    """Reset a stateful term, if it has state."""
    reset = getattr(term, "reset", None)
    if reset is not None:
        reset(env_ids)


def _name(func: Callable) -> str:
    return f"{func.__module__}.{func.__qualname__}"


def qualified_name(func: Callable) -> str:
    """`module:qualname` of a term, used in resolved configs and manifests."""
    return f"{func.__module__}:{func.__qualname__}"
