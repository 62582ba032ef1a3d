# SPDX-License-Identifier: BSD-3-Clause
"""A trained and exported arm_reach policy for the sim-to-sim tests, and `play` on per-episode seeds."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from batonlab.cli.deploy import DEPLOY_ROS_DIR
from batonlab.env.env import BatonEnv
from batonlab.export.onnx import export
from batonlab.rl.evaluate import evaluate
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_agent_cfg, make_task_cfg

if str(DEPLOY_ROS_DIR) not in sys.path:
    sys.path.insert(0, str(DEPLOY_ROS_DIR))
from deploy_ros.sim_robot import seed_episode  # noqa: E402


@dataclass
class TrainedPolicy:
    export_dir: Path
    policy: object
    """The torch inference policy (TensorDict → actions), what `batonlab play` runs."""
    train_success_rate: float
    env_steps: int
    """Env steps the training used (the learning test's budget)."""


def train_and_export(out_dir: Path, num_envs: int = 1024, iterations: int = 80, seed: int = 0) -> TrainedPolicy:
    """Train arm_reach from scratch with BatonRunner and export it (policy.onnx + manifest.json).

    The budget (1024 envs x 24 steps x 80 iterations) is the one `tests/test_learning.py` asserts
    on, so one training serves the learning test and the deploy tests.
    """
    torch.manual_seed(seed)
    cfg = make_task_cfg("arm_reach")
    cfg.num_envs, cfg.seed = num_envs, seed
    env = BatonEnv(cfg)
    runner = BatonRunner(RslRlVecEnv(env), make_agent_cfg("arm_reach"), log_dir=None)
    stats = runner.learn(iterations, progress=False)
    policy = runner.inference_policy()
    play_cfg = make_task_cfg("arm_reach", play=True)
    play_cfg.num_envs = 1
    play_env = BatonEnv(play_cfg)
    export(play_env, policy, out_dir, "arm_reach")
    play_env.close()
    env.close()
    return TrainedPolicy(Path(out_dir), policy, float(stats.get("Episode/success_rate", float("nan"))), runner.total_env_steps)


def play_on_seeds(policy, seeds) -> np.ndarray:
    """`batonlab play`'s evaluation, one episode per seed, each from the initial state sim_robot_node uses."""
    cfg = make_task_cfg("arm_reach", play=True)
    cfg.num_envs = 1
    env = BatonEnv(cfg)
    successes = []
    for seed in seeds:
        seed_episode(env, seed)
        successes.append(bool(evaluate(env, policy, progress=False).successes[0]))
    env.close()
    return np.array(successes)
