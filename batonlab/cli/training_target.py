# SPDX-License-Identifier: BSD-3-Clause
"""Training to a result: `stop_at=success:RATE`, `keep_best`, the iteration ceiling, and what a run says when it ends.

With `stop_at`, every `eval_interval` iterations the policy plays one episode per env of the task's
play variant (as `batonlab play` does, privileges off); training stops at the first evaluation at
or above the rate, or at the ceiling: `max_iterations=` when given, else the task's success bar's
`max_iterations`, else `agent.max_iterations`. Over a user's robot (`robot=` on a task that takes one)
a task with a success bar trains to it by default. With `keep_best=true` the same evaluations keep
`model_best.pt`, the checkpoint of the best one so far (a fine-tuned student can peak and fall).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from batonlab.cli.common import CliError, Invocation
from batonlab.tasks import SuccessBar, get_task

METRICS = ("success",)
"""What `stop_at` can name: the play success rate."""


@dataclass(frozen=True)
class StopAt:
    """Stop training once the play success rate reaches `rate`."""

    rate: float
    """Play success rate to reach [0, 1]."""
    interval: int
    """Iterations between evaluations."""
    by_default: bool
    """Set from the task's success bar, not by `stop_at=`."""

    @property
    def option(self) -> str:
        """The command-line form, `stop_at=success:0.9`."""
        return f"stop_at=success:{self.rate:g}"


@dataclass(frozen=True)
class TrainingPlan:
    """How long a run trains: its total iterations (the ceiling with `stop_at`) and its stop rule."""

    total_iterations: int
    stop_at: StopAt | None
    success_bar: SuccessBar | None
    """The task's bar, reported when a run ends below it."""
    keep_best: bool = False
    """Save `model_best.pt` at each periodic evaluation that beats the best so far."""
    eval_interval: int = 10
    """Iterations between the periodic play evaluations (of `stop_at` and `keep_best`)."""

    @property
    def evaluates(self) -> bool:
        """Whether the run plays periodic evaluations while it trains."""
        return self.stop_at is not None or self.keep_best


def training_plan(inv: Invocation) -> TrainingPlan:
    """The plan of `inv`'s run from `stop_at=`, `keep_best=`, `max_iterations=`, `eval_interval=` and the task's
    success bar.

    Raises:
        CliError: a malformed `stop_at`, `eval_interval` < 1, or `stop_at` / `keep_best` with `distributed=true`
            or without evaluation episodes.
    """
    top = inv.top
    entry = get_task(inv.task_name)
    bar = entry.success_bar
    if top.eval_interval < 1:
        raise CliError(f"eval_interval={top.eval_interval}: expected an integer >= 1")
    stop_at = None
    if top.stop_at is not None:
        stop_at = StopAt(parse_stop_at(top.stop_at), top.eval_interval, by_default=False)
    elif bar is not None and entry.takes_robot and top.robot and not inv.agent.algorithm.is_distillation:
        stop_at = StopAt(bar.success_rate, top.eval_interval, by_default=True)
    if stop_at is not None and top.eval_episodes < 1:
        raise CliError(f"{stop_at.option} is checked by play evaluations: eval_episodes={top.eval_episodes} "
                       f"must be >= 1")
    if top.keep_best and top.eval_episodes < 1:
        raise CliError(f"keep_best=true keeps the checkpoint of the best play evaluation: eval_episodes="
                       f"{top.eval_episodes} must be >= 1")
    if stop_at is not None and top.distributed:
        raise CliError("stop_at= evaluates on one process; it cannot stop a distributed=true run (use max_iterations=)")
    if top.keep_best and top.distributed:
        raise CliError("keep_best=true evaluates on one process; it is not available with distributed=true")
    if top.max_iterations is not None:
        total = top.max_iterations
    elif stop_at is not None and bar is not None:
        total = bar.max_iterations
    else:
        total = inv.agent.max_iterations
    return TrainingPlan(total, stop_at, bar, keep_best=bool(top.keep_best), eval_interval=top.eval_interval)


def parse_stop_at(text) -> float:
    """The rate of `success:RATE`, RATE in (0, 1]."""
    metric, _, value = str(text).partition(":")
    try:
        rate = float(value)
    except ValueError:
        rate = math.nan
    if metric not in METRICS or not 0.0 < rate <= 1.0:
        raise CliError(f"stop_at={text}: expected success:RATE with RATE in (0, 1], e.g. stop_at=success:0.9 "
                       f"(the play success rate at which training stops)")
    return rate


def below_bar_advice(inv: Invocation, plan: TrainingPlan, success_rate: float, iterations: int, run_dir) -> str | None:
    """The line a run ending below its task's success bar prints: by how much, and the command that continues it."""
    bar = plan.success_bar
    if bar is None or success_rate >= bar.success_rate:
        return None
    again = [f"task={inv.task_name}", *([f"robot={inv.top.robot}"] if inv.top.robot else []),
             *(o.input_line for o in inv.task_overrides), "resume=true", f"run_dir={run_dir}",
             f"max_iterations={2 * iterations}"]
    if plan.stop_at is None:
        again.append(f"stop_at=success:{bar.success_rate:g}")
    return (f"[batonlab] {inv.task_name}: play success {success_rate:.2f} is below the task's bar "
            f"{bar.success_rate:.2f} after {iterations} iterations; train on with: batonlab train {' '.join(again)}")
