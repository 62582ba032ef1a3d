# SPDX-License-Identifier: BSD-3-Clause
"""Rebuilding a trained policy from a run folder (play, export).

A distillation checkpoint rebuilds its student and teacher whatever `agent.algorithm.class_name`
says, and the policy is the student; an RL checkpoint rebuilds its actor as it was trained (a
fine-tuned student reads the student's groups). The env runs at privilege level λ = 0, as on a robot.
"""

from __future__ import annotations

from pathlib import Path

from batonlab.cli.common import Invocation, check_run_robot, find_checkpoint, find_run_dir, privileges_off
from batonlab.cli.teacher import add_expert_group
from batonlab.env.env import BatonEnv
from batonlab.rl import checkpoint
from batonlab.rl.distillation import restore_actor_cfg, restore_distillation_cfg
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv


def load_trained(inv: Invocation) -> tuple[BatonEnv, BatonRunner, Path, Path]:
    """The env of `inv.task`, a runner holding the checkpoint's weights, the run folder and checkpoint."""
    run_dir = find_run_dir(inv.top, inv.agent.experiment_name)
    check_run_robot(inv.top, run_dir)
    ckpt = find_checkpoint(inv.top, run_dir)
    state = checkpoint.load(ckpt)
    restore_actor_cfg(inv.agent, state)
    if restore_distillation_cfg(inv.agent, state):
        print(f"[batonlab] {ckpt.name} is a distillation: using its student (observation groups "
              f"{inv.agent.obs_groups['student']}), not its teacher")
        if inv.agent.teacher.expert:
            add_expert_group(inv)  # the teacher model reads it; the student does not
    env = BatonEnv(inv.task)
    runner = BatonRunner(RslRlVecEnv(env), inv.agent, log_dir=None, device=inv.top.device)
    runner.load(ckpt, load_optimizer=False)
    privileges_off(env)  # after `load`: a privilege curriculum's saved state restores its level
    return env, runner, run_dir, ckpt
