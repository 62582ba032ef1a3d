# SPDX-License-Identifier: BSD-3-Clause
"""Checks of a command's configs beyond ranges: the task's structure and model, paths, and what rsl-rl accepts.

`common.build_invocation` runs them before any simulation is built, so that a mistake is one line
naming the key, the value and what is expected, not a traceback from deep inside the env or rsl-rl.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mujoco
import torch

from batonlab.cli import overrides as ov
from batonlab.env.cfg import TaskCfg
from batonlab.rl.cfg import RunnerCfg

SEED_MAX = 2**32 - 1
"""Largest seed: NumPy's legacy seeds stop there, and torch's generators take it too."""

COMMAND_PARAMS = ("command", "restart_on")
"""Term params that name one of the task's commands."""

JOINT_PARAMS = ("joints", "joint")
"""Term params that name joints of the model (a list of names, or one name)."""


class CheckError(ValueError):
    """A config value that would fail (or silently do nothing) once the simulation is built."""


def check_seed(seed: int) -> None:
    """`seed` within what NumPy and torch accept."""
    if not 0 <= seed <= SEED_MAX:
        raise CheckError(f"seed={seed}: expected an integer in [0, {SEED_MAX}] (2**32 - 1)")


def check_positive(values: dict[str, float]) -> None:
    """Each `key: value` a finite number > 0 (time steps, learning rates)."""
    for key, value in values.items():
        if not (math.isfinite(value) and value > 0):
            raise CheckError(f"{key}={ov.show(value)}: expected a finite number > 0")


def check_agent(agent: RunnerCfg) -> None:
    """Layer sizes and activation names that rsl-rl would refuse, or silently turn into an empty layer."""
    from rsl_rl.utils import resolve_nn_activation

    layers = {"agent.policy.actor_hidden_dims": agent.policy.actor_hidden_dims,
              "agent.policy.critic_hidden_dims": agent.policy.critic_hidden_dims,
              "agent.teacher.hidden_dims": agent.teacher.hidden_dims}
    for key, dims in layers.items():
        if any(size < 1 for size in dims):
            raise CheckError(f"{key}={ov.show(dims)}: expected a list of integers >= 1 (the hidden layers' sizes)")
    for key, name in {"agent.policy.activation": agent.policy.activation,
                      "agent.teacher.activation": agent.teacher.activation}.items():
        try:
            resolve_nn_activation(name)
        except ValueError as err:
            valid = str(err).split("Valid activations are: ")[-1]
            raise CheckError(f"{key}={name}: expected one of rsl-rl's activations {valid}") from None


def check_path_names(paths: dict[str, str | None]) -> None:
    """Each `key: path` made of names the file system can hold (a name of more than NAME_MAX bytes fails to be made)."""
    for key, path in paths.items():
        if not path:
            continue
        limit = _name_max(Path(path))
        sizes = {name: len(os.fsencode(name)) for name in Path(path).parts}
        too_long = [name for name, size in sizes.items() if size > limit]
        if too_long:
            shown = Path(*(name[:20] + "..." if name in too_long else name for name in Path(path).parts))
            raise CheckError(f"{key}={shown}: a name of {sizes[too_long[0]]} bytes; expected names of at most {limit} "
                             "bytes, the longest this file system allows")


def check_task(task: TaskCfg, agent: RunnerCfg) -> None:
    """The task has what training needs: an action term, a `policy` observation group, the groups and
    commands its agent and terms name."""
    if not task.actions:
        raise CheckError("env.actions is empty: a task needs at least one action term (the policy's output)")
    groups = list(task.observations)
    if "policy" not in task.observations:
        raise CheckError(f"env.observations has no 'policy' group (it has {groups}): a task needs a 'policy' "
                         "observation group, the policy's input that export writes to the manifest")
    for set_name, names in agent.obs_groups.items():
        for name in names:
            if name not in task.observations:
                raise CheckError(f"agent.obs_groups.{set_name}={ov.show(names)}: the task has no observation group "
                                 f"'{name}'; its groups: {groups}")
    users: dict[str, list[str]] = {}
    for path, params in _terms_with_params(task):
        for key in COMMAND_PARAMS:
            name = params.get(key)
            if isinstance(name, str) and name and name not in task.commands:
                users.setdefault(name, []).append(f"{path}.params.{key}")
    if users:
        name, used_by = next(iter(users.items()))
        raise CheckError(f"env.commands has no '{name}' (it has {list(task.commands)}), which {', '.join(used_by)} "
                         f"name: keep env.commands.{name} or remove those terms too")


def check_model(task: TaskCfg, worlds: dict[str, int]) -> None:
    """Compile the task's model (no worlds yet): the joints its terms name exist, and the worlds fit in memory.

    Args:
        task: The task config, overrides applied.
        worlds: `key: number of worlds` the command builds (`env.num_envs`, `play.num_episodes`).
    """
    from batonlab.env.scene import Scene

    try:
        scene = Scene(task.scene, task.sim)
    except (KeyError, ValueError) as err:
        raise CheckError(f"env.scene: {err.args[0] if isinstance(err, KeyError) else err}") from None
    for path, value in _joint_names(task):
        try:
            scene.joint_ids([value] if isinstance(value, str) else value)
        except KeyError as err:
            raise CheckError(f"{path}={ov.show(value)}: {err.args[0]}") from None
    for key, num_worlds in worlds.items():
        _check_memory(key, num_worlds, scene.model, task)


# Private functions.


def _check_memory(key: str, num_worlds: int, model: mujoco.MjModel, task: TaskCfg) -> None:
    """Refuse a number of worlds whose physics state alone exceeds the memory of the device that holds it.

    A lower bound: each world keeps its MuJoCo state (mj_stateSize FULLPHYSICS, float64) once, and
    once per physics step of a control step (the decimation's rollout), so a number refused here
    could never be built; one that passes may still not fit with everything else.
    """
    nstate = mujoco.mj_stateSize(model, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    copies = 1 + task.sim.decimation
    per_world = 8 * nstate * copies
    available, where = _memory(task.sim.device)
    if num_worlds * per_world <= available:
        return
    raise CheckError(f"{key}={num_worlds}: the worlds' physics state alone needs {_gigabytes(num_worlds * per_world)} "
                     f"({per_world} bytes per world: {nstate} float64 values kept {copies} times, once and once per "
                     f"physics step of env.sim.decimation={task.sim.decimation}) and {where} has "
                     f"{_gigabytes(available)}; expected an integer <= {available // per_world}")


def _memory(device: str) -> tuple[int, str]:
    """Total memory [bytes] of the device that holds the worlds, and its name in words."""
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_properties(torch.device(device)).total_memory, f"the GPU {device}"
    return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "this machine"


def _gigabytes(size: int) -> str:
    return f"{size / 1e9:.1f} GB"


def _name_max(path: Path) -> int:
    """NAME_MAX of the file system `path` is (or would be) on: that of its nearest existing folder."""
    for folder in (path.absolute(), *path.absolute().parents):
        try:
            return os.pathconf(folder, "PC_NAME_MAX")
        except (OSError, ValueError):  # not there (yet), or a name too long to look up
            continue
    return 255


def _terms_with_params(task: TaskCfg) -> Iterator[tuple[str, dict[str, Any]]]:
    """`(override key of the term, its params)` of every term of the task, actions and commands included."""
    for group_name, group in task.observations.items():
        for name, term in group.terms.items():
            yield f"env.observations.{group_name}.terms.{name}", term.params
    for kind in ("actions", "commands", "rewards", "terminations", "events", "costs", "curriculum", "privileges"):
        for name, term in getattr(task, kind).items():
            yield f"env.{kind}.{name}", term.params
    for kind in ("success", "progress"):
        if getattr(task, kind) is not None:
            yield f"env.{kind}", getattr(task, kind).params


def _joint_names(task: TaskCfg) -> Iterator[tuple[str, str | list[str] | tuple[str, ...]]]:
    """`(override key, joint name or names)` of every action term's joints and every joint param of a term."""
    for name, action in task.actions.items():
        yield f"env.actions.{name}.joints", action.joints
    for path, params in _terms_with_params(task):
        for key in JOINT_PARAMS:
            value = params.get(key)
            if isinstance(value, str) or (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
                yield f"{path}.params.{key}", value
