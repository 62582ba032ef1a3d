# SPDX-License-Identifier: BSD-3-Clause
"""Observation terms of the commands a policy follows (targets, velocities)."""

from __future__ import annotations

import torch


def generated_command(env, command: str) -> torch.Tensor:
    """The current value of a command term, (num_envs, dim)."""
    return env.command_manager.command(command)
