# SPDX-License-Identifier: BSD-3-Clause
"""A bag's replay world, built from the task registry: the one link between logs and task names."""

from __future__ import annotations

from pathlib import Path

from batonlab.actions.command_layer import whole_body_policy_terms, with_lower_level
from batonlab.deploy.levels import LOWER_FOLDER
from batonlab.env.env import BatonEnv
from batonlab.logs.bag_reader import BagError, BagLog
from batonlab.logs.open_loop import replay_open_loop
from batonlab.logs.open_loop_result import OpenLoopResult
from batonlab.logs.playback import write_playback
from batonlab.logs.replay_env import make_replay_env, task_of
from batonlab.robots.description import RobotDescriptionError
from batonlab.tasks import TaskRobotError, get_task, list_tasks


def replay_env_for(log: BagLog, task: str | None = None, physics: str = "logged", seed: int = 0,
                   robot: str | None = None, fit: str | None = None) -> BatonEnv:
    """One world of the bag's task (play configuration) over the bag's robot; see `make_replay_env`.

    A task over any robot (`reach`, `velocity`) is built over `robot`, a robot description file, by
    default the one the bag's metadata names (`robot_file`, written by `batonlab play record=`). `fit` is a
    fitted overlay (`batonlab sysid`'s fit.yaml) written over the task's model.
    """
    name, cfg = task_cfg_for(log, task, robot, fit)
    _name_lower_level(log, cfg, name)
    return make_replay_env(log, cfg, physics, seed, task_name=name, robot=robot or log.metadata.get("robot_file"))


def task_cfg_for(log: BagLog, task: str | None = None, robot: str | None = None, fit: str | None = None):
    """(task name, play configuration) of the bag's task over the bag's robot, with the fitted overlay `fit`."""
    name = task_of(log, task)
    try:
        entry = get_task(name)
    except KeyError:
        raise BagError(f"{log.path}: task '{name}' is not registered; valid tasks: {[t.name for t in list_tasks()]}") from None
    robot = robot or log.metadata.get("robot_file")
    if robot and not Path(robot).is_file():
        raise BagError(f"{log.path}: recorded on the robot described by {robot}, which does not exist here")
    try:
        cfg = entry.make_cfg(play=True, robot=robot) if robot else entry.make_cfg(play=True)
    except (TaskRobotError, RobotDescriptionError, FileNotFoundError) as err:
        raise BagError(f"{log.path}: cannot build task '{name}' over robot {robot}: {err}") from None
    if fit:
        cfg.scene.fit = str(fit)
    return name, cfg


def _name_lower_level(log: BagLog, cfg, task: str) -> None:
    """A two-level policy's task builds its frozen whole-body policy from the export the bag names (its `lower/`)."""
    if not whole_body_policy_terms(cfg):
        return
    export = log.metadata.get("export_dir")
    lower = Path(export) / LOWER_FOLDER if export else None
    if lower is None or not lower.is_dir():
        raise BagError(f"{log.path}: task '{task}' runs a whole-body policy under its commands; its world is built from "
                       f"the two-level export the bag was recorded with, whose lower level is not at {lower}")
    with_lower_level(cfg, str(lower))


def replay_open_loop_for(log: BagLog, task: str | None = None, physics: str = "logged", seed: int = 0,
                         robot: str | None = None, fit: str | None = None) -> OpenLoopResult:
    """Open-loop replay of the bag in a world of its task built here (and closed afterwards)."""
    env = replay_env_for(log, task, physics, seed, robot, fit)
    try:
        return replay_open_loop(log, env, physics)
    finally:
        env.close()


def write_playback_for(log: BagLog, path: str | Path, task: str | None = None, size=(240, 320), fps: float = 30.0,
                       webm: bool = False, robot: str | None = None) -> list[Path]:
    """State playback video of the bag (`write_playback`) in a nominal world of its task built here."""
    env = replay_env_for(log, task, "nominal", robot=robot)
    try:
        return write_playback(log, env, path, size, fps, webm)
    finally:
        env.close()
