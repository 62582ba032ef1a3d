# SPDX-License-Identifier: BSD-3-Clause
"""What every subcommand shares: composing the hydra config, building the task, finding runs."""

from __future__ import annotations

import datetime
import random
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import DictConfig, OmegaConf

from batonlab.cli import overrides as ov
from batonlab.env.cfg import TaskCfg
from batonlab.rl.cfg import RunnerCfg

CONF_DIR = Path(__file__).parent / "conf"


class CliError(Exception):
    """A user error: printed without a traceback, exit code 2."""


@dataclass
class Invocation:
    """The composed top-level options plus the task and agent configs with overrides applied."""

    top: DictConfig
    task_name: str
    task: TaskCfg
    agent: RunnerCfg


def compose_top(args: list[str]) -> tuple[DictConfig, list]:
    """Hydra-compose the top-level options; returns them and the parsed env./agent. overrides."""
    try:
        parsed = ov.parse(args)
    except HydraException as err:
        raise CliError(f"could not parse overrides {args}: {err}") from None
    top_args = [a for a, p in zip(args, parsed) if not p.key_or_group.startswith(("env.", "agent."))]
    task_overrides = [p for p in parsed if p.key_or_group.startswith(("env.", "agent."))]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        try:
            top = compose(config_name="batonlab", overrides=top_args)
        except HydraException as err:
            valid = sorted(OmegaConf.to_container(compose(config_name="batonlab")).keys())
            raise CliError(f"{err}\nvalid top-level keys: {valid} (task options: env.<field>=..., agent.<field>=...)") from None
    return top, task_overrides


def build_invocation(args: list[str], play: bool = False) -> Invocation:
    from batonlab.tasks import get_task

    top, task_overrides = compose_top(args)
    if not top.task:
        from batonlab.tasks import list_tasks

        raise CliError(f"missing task=<name>; valid tasks: {[t.name for t in list_tasks()]}")
    try:
        entry = get_task(top.task)
    except KeyError as err:
        raise CliError(str(err.args[0])) from None
    task, agent = entry.make_cfg(play=play), entry.make_agent_cfg()
    for p in task_overrides:
        root_name, key = p.key_or_group.split(".", 1)
        root = task if root_name == "env" else agent
        try:
            ov.apply_override(root, key, None if p.is_delete() else p.value(), delete=p.is_delete(), root_name=root_name)
        except (KeyError, TypeError) as err:
            raise CliError(str(err.args[0])) from None
    task.seed = int(top.seed)
    try:
        task.validate()
    except ValueError as err:
        raise CliError(str(err)) from None
    return Invocation(top, top.task, task, agent)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def new_run_dir(top: DictConfig, experiment: str) -> Path:
    stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
    return Path(top.log_root) / experiment / stamp


def find_run_dir(top: DictConfig, experiment: str) -> Path:
    """`run_dir=` if given, else the newest run of the experiment that holds a checkpoint."""
    if top.run_dir:
        path = Path(top.run_dir)
        if not path.is_dir():
            raise CliError(f"run_dir {path} does not exist")
        return path
    root = Path(top.log_root) / experiment
    from batonlab.rl.checkpoint import latest_checkpoint

    runs = sorted(p for p in root.glob("*") if p.is_dir() and latest_checkpoint(p) is not None) if root.is_dir() else []
    if not runs:
        raise CliError(f"no run with a checkpoint under {root}; train first or pass run_dir=...")
    return runs[-1]


def find_checkpoint(top: DictConfig, run_dir: Path) -> Path:
    from batonlab.rl.checkpoint import latest_checkpoint

    if top.checkpoint:
        path = Path(top.checkpoint)
        if not path.is_file():
            raise CliError(f"checkpoint {path} does not exist")
        return path
    path = latest_checkpoint(run_dir)
    if path is None:
        raise CliError(f"no model_*.pt in {run_dir}")
    return path
