# SPDX-License-Identifier: BSD-3-Clause
"""Task registry (installed as `batonlab.tasks`).

A task is a factory `make_<task>_cfg(play=False) -> TaskCfg` paired with a training config factory
`make_<task>_agent_cfg() -> RunnerCfg`. The registry calls the factories on every request, so each
caller gets its own copy and one run can never corrupt the next. Tasks come from three places:

- built in: the modules of this package call `register` when imported;
- entry points: a distribution declares `<task name> = "<module>:make_<task>_cfg"` in the entry-point
  group `batonlab.tasks`; any process of the same environment finds it, and a plugin that fails to
  load is reported by `list_broken_tasks` without hiding the others;
- import paths: a name of the form `"<module>:<factory>"` (e.g. `task=my_pkg.reach:make_cfg` on the
  command line) imports that module, which must be installed or on PYTHONPATH.

A task over any robot (`reach`, `velocity`) takes the robot as a keyword, `make_<task>_cfg(play=False,
robot=None)`, a robot description YAML (None: the task's default robot); `make_task_cfg(name, robot=...)`
and `get_task(name).make_cfg(robot=...)` pass it on, and give a task whose factory has no `robot`
keyword a clear `TaskRobotError` instead.

For the last two, the training config is the factory's sibling in the same module (`make_x_cfg` ->
`make_x_agent_cfg`, `make_cfg` -> `make_agent_cfg`) or, when the module has none, `RunnerCfg()`
with `experiment_name` set to the entry point's name (`x` for an import path `<module>:make_x_cfg`,
else the module's last component), so runs go to `logs/<that name>/`. The description is the first
line of the factory's docstring.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from dataclasses import dataclass
from importlib import metadata
from typing import Callable

from batonlab.env.cfg import TaskCfg
from batonlab.rl.cfg import RunnerCfg

ENTRY_POINT_GROUP = "batonlab.tasks"
"""Entry-point group of task plugins: each entry point names a task factory; its name is the task name."""

BUILTIN = "built-in"
"""Origin of the tasks defined in this package."""


@dataclass(frozen=True)
class SuccessBar:
    """The play success rate a trained policy of a task should reach, and how long training to it may take."""

    success_rate: float
    """Play success rate a run should end at or above [0, 1]; a run that ends below it says so."""
    max_iterations: int
    """Ceiling on iterations when training to the bar (`stop_at=success:<bar>`, the default over a user's robot)."""


@dataclass(frozen=True)
class TaskEntry:
    """A registered task: its factories and where it was defined."""

    name: str
    make_cfg: Callable[..., TaskCfg]
    """`make_cfg(play=False, robot=None)` returns a fresh TaskCfg (`robot=` only for `takes_robot` tasks)."""
    make_agent_cfg: Callable[[], RunnerCfg]
    """Returns a fresh RunnerCfg."""
    description: str
    origin: str = BUILTIN
    """`built-in`, `entry point of <distribution> <version>` or `module <module>`."""
    success_bar: SuccessBar | None = None
    """What a trained policy should reach; over a user's robot (`robot=`) training runs until it does."""
    same_policy_as: str | None = None
    """The task whose policies this one's are (same observations and actions, another lower level or scene): a
    student of either fine-tunes on the other (`finetune=`)."""

    @property
    def takes_robot(self) -> bool:
        """Whether the task is built over any robot: its factory has a `robot` keyword."""
        return takes_robot(self.make_cfg)


class TaskRobotError(ValueError):
    """`robot=` given to a task whose robot is fixed."""


@dataclass(frozen=True)
class BrokenTask:
    """A task plugin that could not be loaded."""

    name: str
    origin: str
    error: str
    """The exception, on one line (`ModuleNotFoundError: No module named 'x'`)."""


_REGISTRY: dict[str, TaskEntry] = {}
_BROKEN: dict[str, BrokenTask] = {}
_plugin_names: set[str] = set()
"""Entry-point names already loaded (or found broken)."""
_plugins_loaded = False


def register(name: str, make_cfg: Callable[..., TaskCfg], make_agent_cfg: Callable[[], RunnerCfg], description: str,
             success_bar: SuccessBar | None = None, same_policy_as: str | None = None) -> None:
    """Add a task under `name`; the built-in task modules call this when imported."""
    if name in _REGISTRY:
        raise ValueError(f"task '{name}' is already registered")
    module = make_cfg.__module__
    origin = BUILTIN if module.startswith(__name__ + ".") else f"module {module}"
    _REGISTRY[name] = TaskEntry(name, _robot_checked(name, make_cfg), make_agent_cfg, description, origin, success_bar,
                                same_policy_as)


def list_tasks() -> list[TaskEntry]:
    """Every task that loads: built-in and entry points (broken plugins are in `list_broken_tasks`)."""
    _load_builtin_tasks()
    _load_plugins()
    return [_REGISTRY[name] for name in sorted(_REGISTRY)]


def list_broken_tasks() -> list[BrokenTask]:
    """Entry points of the `batonlab.tasks` group that failed to load, with their errors."""
    _load_builtin_tasks()
    _load_plugins()
    return [_BROKEN[name] for name in sorted(_BROKEN)]


def get_task(name: str) -> TaskEntry:
    """The task called `name`, or the factory `name = "<module>:<factory>"`.

    Raises:
        KeyError: unknown name (the message lists the valid ones), or a plugin or module that fails
            to load (the message names it and its error).
    """
    _load_builtin_tasks()
    if name in _REGISTRY:
        return _REGISTRY[name]
    if ":" in name:
        return _load_import_path(name)
    if name not in _plugin_names and not _plugins_loaded:
        # Load only this task's plugin: a broken plugin of another task must not stop this one.
        found = [ep for ep in metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        _load_entry_points(name, found)
    if name in _BROKEN:
        broken = _BROKEN[name]
        raise KeyError(f"task '{name}' ({broken.origin}) failed to load: {broken.error}")
    if name not in _REGISTRY:
        raise KeyError(f"unknown task '{name}'; valid tasks: {[t.name for t in list_tasks()]} "
                       "(or a factory given as <module>:<function>)")
    return _REGISTRY[name]


def same_policy(first: str, second: str) -> bool:
    """Whether tasks `first` and `second` are the same task or one's policies are the other's (`same_policy_as`)."""
    if first == second:
        return True
    try:
        family = {name: get_task(name).same_policy_as or name for name in (first, second)}
    except KeyError:  # a task that no longer loads shares with nothing
        return False
    return family[first] == family[second]


def make_task_cfg(name: str, play: bool = False, robot: str | None = None) -> TaskCfg:
    """A fresh TaskCfg of a registered task (or of a `<module>:<factory>` name).

    Args:
        robot: A robot description YAML, for tasks over any robot (None: the task's own robot).

    Raises:
        KeyError: unknown task. TaskRobotError: `robot` given to a task with a fixed robot.
    """
    return get_task(name).make_cfg(play=play, robot=robot)


def takes_robot(make_cfg: Callable[..., TaskCfg]) -> bool:
    """Whether a task factory (or its `robot`-checking wrapper) has a `robot` keyword."""
    return "robot" in inspect.signature(inspect.unwrap(make_cfg)).parameters


def make_agent_cfg(name: str) -> RunnerCfg:
    """A fresh training config of a registered task (or of a `<module>:<factory>` name)."""
    return get_task(name).make_agent_cfg()


# Private functions.


def _load_builtin_tasks() -> None:
    # Task modules register themselves on import; importing here keeps `import batonlab.tasks` cheap.
    from batonlab.tasks import (  # noqa: F401
        arm_door,
        arm_lift,
        arm_push_grasp,
        arm_reach,
        reach,
        velocity,
        wl_balance,
        wl_baton,
        wl_chase,
        wl_door,
        wl_flat,
        wl_loco_manip,
        wl_loco_manip_upper,
        wl_velocity,
    )


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    by_name: dict[str, list[metadata.EntryPoint]] = {}
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        by_name.setdefault(ep.name, []).append(ep)
    for name, found in by_name.items():
        if name not in _plugin_names:
            _load_entry_points(name, found)
    _plugins_loaded = True


def _load_entry_points(name: str, found: list[metadata.EntryPoint]) -> None:
    """Register the entry point(s) called `name`, or record why they cannot be."""
    if not found:
        return
    _plugin_names.add(name)
    origins = [f"entry point of {ep.dist.name} {ep.dist.version}" if ep.dist else f"entry point {ep.value}" for ep in found]
    if name in _REGISTRY:
        _BROKEN[name] = BrokenTask(name, origins[0], f"the name is taken by the task from {_REGISTRY[name].origin}")
    elif len(found) > 1:
        _BROKEN[name] = BrokenTask(name, " and ".join(origins), "two distributions declare this task name")
    elif ":" in name:
        _BROKEN[name] = BrokenTask(name, origins[0], "a task name must not contain ':'")
    elif not found[0].attr:
        _BROKEN[name] = BrokenTask(name, origins[0], f"'{found[0].value}' names no factory; write <module>:<function>")
    else:
        try:
            _REGISTRY[name] = _load_factory(name, found[0].module, found[0].attr, origins[0])
        except Exception as err:  # A plugin may fail in any way; the other tasks must still work.
            _BROKEN[name] = BrokenTask(name, origins[0], _one_line(err))


def _load_import_path(name: str) -> TaskEntry:
    module_name, _, attr = name.partition(":")
    try:
        return _load_factory(name, module_name, attr, f"module {module_name}")
    except Exception as err:
        raise KeyError(f"task '{name}': cannot load {attr!r} from module {module_name!r} (installed or on PYTHONPATH?): "
                       f"{_one_line(err)}") from None


def _load_factory(name: str, module_name: str, attr: str, origin: str) -> TaskEntry:
    """Import `module_name` and pair its factory `attr` with the sibling agent config factory, or the default."""
    module = importlib.import_module(module_name)
    factory = getattr(module, attr)
    if not callable(factory):
        raise TypeError(f"{module_name}:{attr} is not callable")
    sibling = attr.removesuffix("_cfg") + "_agent_cfg" if attr.endswith("_cfg") else None
    make_agent_cfg = getattr(module, sibling, None) if sibling else None
    if make_agent_cfg is None:
        make_agent_cfg = functools.partial(RunnerCfg, experiment_name=_short_name(name))
    description = (factory.__doc__ or "").strip().split("\n")[0]
    return TaskEntry(name, _robot_checked(name, factory), make_agent_cfg, description, origin)


def _robot_checked(name: str, factory: Callable[..., TaskCfg]) -> Callable[..., TaskCfg]:
    """`factory` itself if it takes `robot`; else a wrapper that accepts `robot=None` and refuses a robot."""
    if takes_robot(factory):
        return factory

    @functools.wraps(factory)
    def make_cfg(play: bool = False, robot: str | None = None) -> TaskCfg:
        if robot is not None:
            over_any = [t.name for t in list_tasks() if t.takes_robot]
            raise TaskRobotError(f"task '{name}' has a fixed robot; robot= applies to tasks: {', '.join(over_any)}")
        return factory(play=play)

    return make_cfg


def _short_name(name: str) -> str:
    """`x` for `<module>:make_x_cfg`, the module's last component for other import paths, else `name`."""
    module_name, _, attr = name.rpartition(":")
    if not module_name:
        return name
    if attr.startswith("make_") and attr.endswith("_cfg") and len(attr) > len("make__cfg"):
        return attr.removeprefix("make_").removesuffix("_cfg")
    return module_name.rpartition(".")[2]


def _one_line(err: BaseException) -> str:
    return " ".join(f"{type(err).__name__}: {err}".split())
