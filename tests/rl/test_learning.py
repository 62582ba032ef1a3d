# SPDX-License-Identifier: BSD-3-Clause
"""Learning is tested by learning: arm_reach from scratch on the CPU within a fixed env-step budget.

The training itself is the session fixture `arm_reach_policy` (tests/fixture_trainings.py), which the
deploy tests reuse: one training per test session.
"""

from __future__ import annotations

import pytest

from batonlab.rl.evaluate import evaluate
from conftest import make_reach_env

BUDGET_ENV_STEPS = 1024 * 24 * 80
"""1.97M env steps (1024 envs × 24 steps × 80 iterations): the shared fixture's budget, which the progress
encoder's test needs (with 0.25M its Spearman bar failed; docs/TESTING.md)."""


@pytest.mark.slow
def test_arm_reach_learns_to_90_percent_success(arm_reach_policy):
    assert arm_reach_policy.env_steps == BUDGET_ENV_STEPS
    # 256 fresh episodes on other seeds, no observation noise, deterministic actions.
    env = make_reach_env(num_envs=256, seed=123, play=True)
    result = evaluate(env, arm_reach_policy.policy, progress=False)
    env.close()
    print(f"arm_reach success rate {result.success_rate:.3f} over {result.num_episodes} episodes")
    assert result.num_episodes >= 200
    assert result.success_rate >= 0.9
