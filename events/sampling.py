# SPDX-License-Identifier: BSD-3-Clause
"""Random draws shared by event terms."""

from __future__ import annotations

import torch


def uniform_or_zero(env, n: int, ranges: dict[str, tuple[float, float]] | None, key: str) -> torch.Tensor:
    """(n,) draws from U(ranges[key]); zeros when `ranges` has no `key` (an axis left alone)."""
    if not ranges or key not in ranges:
        return torch.zeros(n, device=env.device)
    return env.uniform(n, *ranges[key])
