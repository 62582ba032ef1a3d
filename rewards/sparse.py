# SPDX-License-Identifier: BSD-3-Clause
"""Sparse rewards: the "did it succeed" signal that learned rewards start from."""

from __future__ import annotations

import torch


def success_indicator(env) -> torch.Tensor:
    """1 where the task's success term holds on the current state, else 0.

    Paid every step while the state counts as success (the manager multiplies by the weight and dt).
    """
    if env.success_term is None:
        raise ValueError("success_indicator needs a task with a success term (TaskCfg.success)")
    return env.success_term(env).float()
