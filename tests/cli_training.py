# SPDX-License-Identifier: BSD-3-Clause
"""Trainings for tests, through `batonlab train`'s own entry (`batonlab.cli.train.train`) as a user runs
them: a run folder with config.yaml, checkpoints and TensorBoard events; the policy loaded back from the
checkpoint as `batonlab play` loads it, and exported as `batonlab export` writes it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from batonlab.cli import export as cli_export
from batonlab.cli.common import build_invocation
from batonlab.cli.policy_loading import load_trained
from batonlab.cli.train import train


@dataclass
class TrainedRun:
    task: str
    run_dir: Path
    checkpoint: Path
    """The run's last checkpoint, `model_<iterations>.pt`."""
    policy: object
    """The torch inference policy (TensorDict → actions) of that checkpoint, what `batonlab play` runs."""
    env_steps: int
    """Env steps the training used (the learning tests' budget)."""
    stats: dict[str, float]
    """Statistics of the last iteration (`Episode/success_rate`, `Perf/steps_per_s`, ...)."""
    wall_s: float
    """Wall time of the learning loop [s]."""


def train_run(task: str, log_root: Path, *overrides: str, seed: int = 0,
              on_iteration: Callable | None = None) -> TrainedRun:
    """`batonlab train task=TASK log_root=LOG_ROOT seed=SEED OVERRIDES`, without the closing evaluation or
    the progress bar (tests evaluate on their own seeds)."""
    inv = build_invocation([f"task={task}", f"log_root={log_root}", f"seed={seed}", "eval_episodes=0", "progress=false",
                            *overrides])
    result = train(inv, on_iteration=on_iteration)
    assert not result.interrupted and result.checkpoint is not None, f"the training of {task} stopped early"
    return TrainedRun(task, result.run_dir, result.checkpoint, load_policy(result.run_dir), result.env_steps,
                      result.stats, result.wall_s)


def load_policy(run_dir: Path):
    """The inference policy of the newest checkpoint in `run_dir`, loaded as `batonlab play run_dir=…` loads it."""
    env, runner, _, _ = load_trained(build_invocation([f"run_dir={run_dir}", "env.num_envs=1"], play=True))
    env.close()
    return runner.inference_policy()


def export_run(run_dir: Path, out_dir: Path) -> Path:
    """`batonlab export run_dir=RUN_DIR export.out_dir=OUT_DIR`; returns OUT_DIR."""
    assert cli_export.run(build_invocation([f"run_dir={run_dir}", f"export.out_dir={out_dir}"], play=True)) == 0
    return Path(out_dir)
