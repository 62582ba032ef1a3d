# SPDX-License-Identifier: BSD-3-Clause
"""Learning is tested by learning: wl_balance (with the stowed arm) from scratch on the CPU learns to
stay upright under pushes within a fixed env-step budget."""

from __future__ import annotations

import pytest
import torch

from batonlab.env.env import BatonEnv
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_agent_cfg, make_task_cfg

NUM_ENVS = 512
ITERATIONS = 64
"""Budget: 512 envs x 24 steps x 64 iterations = 0.79M env steps (about 3 minutes on 2 idle cores)."""


@torch.inference_mode()
def survival_fraction(env: BatonEnv, policy) -> float:
    """Mean length of each env's first episode over the time-out horizon."""
    obs, _ = env.reset()
    length = torch.zeros(env.num_envs)
    finished = torch.zeros(env.num_envs, dtype=torch.bool)
    while not finished.all():
        obs, _, terminated, truncated, _ = env.step(policy(obs))
        length += (~finished).float()
        finished |= terminated | truncated
    return (length / env.max_episode_length).mean().item()


@pytest.mark.slow
def test_wl_balance_learns_to_stay_upright_under_pushes(tmp_path):
    torch.manual_seed(0)
    # One learner thread: with the rollout threads on the same two cores, more only adds contention.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = make_task_cfg("wl_balance")
        cfg.num_envs, cfg.seed = NUM_ENVS, 0
        agent = make_agent_cfg("wl_balance")
        train_env = BatonEnv(cfg)
        runner = BatonRunner(RslRlVecEnv(train_env), agent, log_dir=tmp_path)
        runner.learn(ITERATIONS, progress=False)
        assert runner.total_env_steps == NUM_ENVS * agent.num_steps_per_env * ITERATIONS
        train_env.close()

        # Evaluation on flat ground with the training randomisation: pushes every 3-5 s, random initial
        # states, observation noise, latency; deterministic actions, one 10 s episode per env.
        eval_cfg = make_task_cfg("wl_balance")
        eval_cfg.num_envs, eval_cfg.seed = 128, 123
        assert eval_cfg.scene.terrain.kind == "plane" and "push" in eval_cfg.events
        eval_env = BatonEnv(eval_cfg)
        survival = survival_fraction(eval_env, runner.inference_policy())
        eval_env.close()
    finally:
        torch.set_num_threads(threads)
    print(f"wl_balance survival {survival:.3f} of the {eval_cfg.episode_length_s:.0f} s horizon")
    assert survival >= 0.9
