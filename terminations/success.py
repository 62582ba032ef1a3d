# SPDX-License-Identifier: BSD-3-Clause
"""Success terms, judged on the last step of each episode."""

from __future__ import annotations

import torch


def survived(env) -> torch.Tensor:
    """Success term: the episode reached its time limit without a failure."""
    return (env.episode_length_buf >= env.max_episode_length) & ~env.termination_manager.terminated


def command_tracked(env, command: str, max_mean_error: float) -> torch.Tensor:
    """Success term: survived, with a mean |v - v_cmd| over the episode below `max_mean_error` [m/s].

    Reads the `metrics` of a `BaseVelocityCommand`.
    """
    metrics = env.command_manager.terms[command].metrics
    mean_error = metrics["lin_vel_error"] / metrics["time"].clamp(min=1e-6)
    return survived(env) & (mean_error < max_mean_error)
