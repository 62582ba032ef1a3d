# SPDX-License-Identifier: BSD-3-Clause
"""`teacher=RUN_DIR`: the teacher of `batonlab train ... agent.algorithm.class_name=Distillation`.

The teacher is a training run of the same task. Its architecture (actor groups, hidden dims,
activation, normalisation) is read from the run's resolved `config.yaml`; its weights from the
newest readable `model_*.pt`, picked as `play` picks it (or the file given as `teacher=FILE`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from batonlab.cli.common import CliError, Invocation, find_checkpoint
from batonlab.rl.cfg import TeacherCfg
from batonlab.rl.distillation import teacher_cfg_from_run
from batonlab.rl.expert_teacher import EXPERT_GROUP, expert_observations

EXPERT = "expert"
"""`teacher=expert`: the task's scripted expert (`TaskCfg.expert`) labels the student's states."""


def resolve_teacher(inv: Invocation) -> None:
    """Fill `inv.agent.teacher` from `teacher=` (a run folder or one of its checkpoints).

    Raises:
        CliError: No `teacher=`, no such folder, no config.yaml, a run of another task or a
            distillation run, or no readable checkpoint.
    """
    if not inv.top.teacher:
        raise CliError("agent.algorithm.class_name=Distillation needs teacher=RUN_DIR, the training run of the teacher "
                       f"(e.g. logs/{inv.agent.experiment_name}/<time>)")
    if inv.top.teacher == EXPERT:
        inv.agent.teacher = TeacherCfg(obs_groups=[EXPERT_GROUP], expert=True)
        add_expert_group(inv)
        return
    path = Path(inv.top.teacher)
    if not path.exists():
        raise CliError(f"teacher={path}: no such run folder or checkpoint")
    run_dir = path.parent if path.is_file() else path
    config = run_dir / "config.yaml"
    if not config.is_file():
        raise CliError(f"teacher={path}: {run_dir} has no config.yaml (not a batonlab training run folder)")
    saved = yaml.safe_load(config.read_text()) or {}
    if saved.get("task_name") != inv.task_name:
        raise CliError(f"teacher={path} is a run of task {saved.get('task_name')!r}, this run trains {inv.task_name!r}: "
                       "the teacher must be trained on the same task")
    checkpoint_file = find_checkpoint(dataclasses.replace(inv.top, checkpoint=str(path) if path.is_file() else None),
                                      run_dir)
    try:
        inv.agent.teacher = teacher_cfg_from_run(saved.get("agent") or {}, checkpoint_file)
    except ValueError as err:
        raise CliError(f"teacher={path}: {err}") from None


def add_expert_group(inv: Invocation) -> None:
    """Run the task's scripted expert in the env as the privileged observation group the expert teacher reads.

    Raises:
        CliError: The task has no scripted expert.
    """
    expert = inv.task.expert
    if expert is None:
        raise CliError(f"task {inv.task_name!r} has no scripted expert (TaskCfg.expert); teacher= takes a training "
                       "run folder of the same task")
    inv.task.observations[EXPERT_GROUP] = expert_observations(expert)
