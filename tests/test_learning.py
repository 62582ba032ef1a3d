# SPDX-License-Identifier: BSD-3-Clause
"""Learning is tested by learning: arm_reach from scratch on the CPU within a fixed env-step budget."""

from __future__ import annotations

import pytest
import torch

from batonlab.rl.evaluate import evaluate
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_agent_cfg
from tests.conftest import make_reach_env

NUM_ENVS = 1024
ITERATIONS = 80
"""Budget: 1024 envs x 24 steps x 80 iterations = 1.97M env steps (about 2 minutes on 2 idle cores)."""


@pytest.mark.slow
def test_arm_reach_learns_to_90_percent_success(tmp_path):
    torch.manual_seed(0)
    agent = make_agent_cfg("arm_reach")
    train_env = make_reach_env(num_envs=NUM_ENVS, seed=0)
    runner = BatonRunner(RslRlVecEnv(train_env), agent, log_dir=tmp_path)
    runner.learn(ITERATIONS, progress=False)
    assert runner.total_env_steps == NUM_ENVS * agent.num_steps_per_env * ITERATIONS
    train_env.close()

    # Evaluation: 256 fresh episodes on other seeds, no observation noise, deterministic actions.
    eval_env = make_reach_env(num_envs=256, seed=123, play=True)
    result = evaluate(eval_env, runner.inference_policy(), progress=False)
    eval_env.close()
    print(f"arm_reach success rate {result.success_rate:.3f} over {result.num_episodes} episodes")
    assert result.num_episodes >= 200
    assert result.success_rate >= 0.9
