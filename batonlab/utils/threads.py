# SPDX-License-Identifier: BSD-3-Clause
"""torch's intra-op thread count, set for the length of a block."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch


@contextlib.contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run the block with `count` torch intra-op threads (0: one per CPU core), then restore the previous count."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count or os.cpu_count() or 1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
