# SPDX-License-Identifier: BSD-3-Clause
"""Rebuilding a trained policy from a run folder (play, export)."""

from __future__ import annotations

from pathlib import Path

from batonlab.cli.common import Invocation, find_checkpoint, find_run_dir
from batonlab.env.env import BatonEnv
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv


def load_trained(inv: Invocation) -> tuple[BatonEnv, BatonRunner, Path, Path]:
    """The env of `inv.task`, a runner holding the checkpoint's weights, the run folder and checkpoint."""
    run_dir = find_run_dir(inv.top, inv.agent.experiment_name)
    ckpt = find_checkpoint(inv.top, run_dir)
    env = BatonEnv(inv.task)
    runner = BatonRunner(RslRlVecEnv(env), inv.agent, log_dir=None, device=inv.top.device)
    runner.load(ckpt, load_optimizer=False)
    return env, runner, run_dir, ckpt
