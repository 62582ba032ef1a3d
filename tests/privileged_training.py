# SPDX-License-Identifier: BSD-3-Clause
"""Teachers of the privileged tasks, trained once per session, and their evaluation at a chosen λ.

A teacher's actor reads the privileged observation group, so it is not exported: it is evaluated in
simulation and distilled into a deployable student.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from batonlab.env.env import BatonEnv
from batonlab.rl.cfg import RunnerCfg
from batonlab.rl.distillation import teacher_cfg_from_run
from batonlab.rl.evaluate import EvalResult, evaluate
from batonlab.tasks import make_agent_cfg, make_task_cfg


@dataclass
class TrainedTeacher:
    task: str
    run_dir: Path
    """The training run folder (`model_<iterations>.pt` in it), what `teacher=RUN_DIR` takes."""
    checkpoint: Path
    policy: object
    """The torch inference policy (TensorDict → actions)."""
    privilege_level: float
    """λ during the whole training."""
    env_steps: int


def distillation_agent(task: str, teacher_run: Path, checkpoint: Path) -> RunnerCfg:
    """`task`'s agent set to distil the teacher of `teacher_run` from `checkpoint` (as `teacher=RUN_DIR` sets it)."""
    saved = yaml.safe_load((teacher_run / "config.yaml").read_text())
    agent = make_agent_cfg(task)
    agent.algorithm.class_name = "Distillation"
    agent.teacher = teacher_cfg_from_run(saved["agent"], checkpoint)
    return agent


@torch.inference_mode()
def evaluate_at_level(task: str, policy, privilege_level: float, num_episodes: int = 64, seed: int = 7) -> EvalResult:
    """One episode per env of the play task at privilege level λ (play runs at 0; a teacher's training level
    shows what it learned with help)."""
    cfg = make_task_cfg(task, play=True)
    cfg.num_envs, cfg.seed, cfg.privilege_level = num_episodes, seed, privilege_level
    env = BatonEnv(cfg)
    result = evaluate(env, policy, progress=False)
    env.close()
    return result
