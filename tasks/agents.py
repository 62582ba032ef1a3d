# SPDX-License-Identifier: BSD-3-Clause
"""Training configs the built-in tasks share: one PPO recipe sized per task, and variants that only rename their runs."""

from __future__ import annotations

from typing import Callable

from batonlab.rl.cfg import AlgorithmCfg, PolicyCfg, RunnerCfg

ROLLOUT_STEPS = 24
"""Control steps per env and training iteration of the built-in agents."""


def ppo_agent_cfg(experiment_name: str, max_iterations: int, save_interval: int = 50,
                  hidden_dims: tuple[int, ...] = (128, 128, 64), obs_groups: dict[str, list[str]] | None = None,
                  gamma: float = 0.99) -> RunnerCfg:
    """PPO as the built-in tasks train it: 24 steps per env, learning rate 1e-3, entropy 0.005, 4 mini-batches,
    initial action noise 1.0, the same widths for actor and critic; `obs_groups` None: both read `policy`."""
    cfg = RunnerCfg(
        experiment_name=experiment_name,
        num_steps_per_env=ROLLOUT_STEPS,
        max_iterations=max_iterations,
        save_interval=save_interval,
        policy=PolicyCfg(actor_hidden_dims=hidden_dims, critic_hidden_dims=hidden_dims, init_noise_std=1.0),
        algorithm=AlgorithmCfg(learning_rate=1e-3, entropy_coef=0.005, num_mini_batches=4, gamma=gamma),
    )
    if obs_groups is not None:
        cfg.obs_groups = obs_groups
    return cfg


def variant_agent_cfg(make_agent_cfg: Callable[[], RunnerCfg], experiment_name: str) -> RunnerCfg:
    """The training config of a task's variant: the base task's, with its runs under `logs/<experiment_name>/`."""
    cfg = make_agent_cfg()
    cfg.experiment_name = experiment_name
    return cfg
