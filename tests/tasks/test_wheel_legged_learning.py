# SPDX-License-Identifier: BSD-3-Clause
"""Learning is tested by learning: wl_balance (with the stowed arm) from scratch on the CPU learns to
stay upright under pushes within a fixed env-step budget.

The training itself is the session fixture `wl_balance_policy` (tests/fixture_trainings.py), which the
sim-to-sim tests reuse: one training per test session.
"""

from __future__ import annotations

import pytest
import torch

from batonlab.env.env import BatonEnv
from batonlab.tasks import make_task_cfg

BUDGET_ENV_STEPS = 256 * 24 * 64
"""0.39M env steps (256 envs × 24 steps × 64 iterations; until issue 27: 0.79M)."""


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
def test_wl_balance_learns_to_stay_upright_under_pushes(wl_balance_policy):
    assert wl_balance_policy.env_steps == BUDGET_ENV_STEPS
    # Evaluation on flat ground with the training randomisation: pushes every 3-5 s, random initial
    # states, observation noise, latency; deterministic actions, one 10 s episode per env.
    eval_cfg = make_task_cfg("wl_balance")
    eval_cfg.num_envs, eval_cfg.seed = 128, 123
    assert eval_cfg.scene.terrain.kind == "plane" and "push" in eval_cfg.events
    eval_env = BatonEnv(eval_cfg)
    survival = survival_fraction(eval_env, wl_balance_policy.policy)
    eval_env.close()
    print(f"wl_balance survival {survival:.3f} of the {eval_cfg.episode_length_s:.0f} s horizon")
    assert survival >= 0.9
