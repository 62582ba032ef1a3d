# SPDX-License-Identifier: BSD-3-Clause
"""Observation terms of the privilege level λ (privileged critics only)."""

from __future__ import annotations

import torch


def privilege_level(env) -> torch.Tensor:
    """The privilege level λ, (num_envs, 1): a privileged observation (a critic's value depends on the help)."""
    return torch.full((env.num_envs, 1), env.privilege_manager.level, device=env.device)
