# SPDX-License-Identifier: BSD-3-Clause
"""Task registry (installed as `batonlab.tasks`).

Each task module exposes `make_<task>_cfg(play=False) -> TaskCfg` and `make_<task>_agent_cfg() ->
RunnerCfg`. The registry calls the factories on every request, so each caller gets its own copy
and one run can never corrupt the next.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from batonlab.env.cfg import TaskCfg
from batonlab.rl.cfg import RunnerCfg


@dataclass(frozen=True)
class TaskEntry:
    name: str
    make_cfg: Callable[..., TaskCfg]
    make_agent_cfg: Callable[[], RunnerCfg]
    description: str


_REGISTRY: dict[str, TaskEntry] = {}


def register(name: str, make_cfg: Callable[..., TaskCfg], make_agent_cfg: Callable[[], RunnerCfg], description: str) -> None:
    if name in _REGISTRY:
        raise ValueError(f"task '{name}' is already registered")
    _REGISTRY[name] = TaskEntry(name, make_cfg, make_agent_cfg, description)


def list_tasks() -> list[TaskEntry]:
    _load_builtin_tasks()
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def get_task(name: str) -> TaskEntry:
    _load_builtin_tasks()
    if name not in _REGISTRY:
        raise KeyError(f"unknown task '{name}'; valid tasks: {sorted(_REGISTRY)}")
    return _REGISTRY[name]


def make_task_cfg(name: str, play: bool = False) -> TaskCfg:
    """A fresh TaskCfg of a registered task."""
    return get_task(name).make_cfg(play=play)


def make_agent_cfg(name: str) -> RunnerCfg:
    """A fresh training config of a registered task."""
    return get_task(name).make_agent_cfg()


def _load_builtin_tasks() -> None:
    # Task modules register themselves on import; importing here keeps `import batonlab.tasks` cheap.
    from batonlab.tasks import arm_reach, wl_balance, wl_velocity  # noqa: F401
