# SPDX-License-Identifier: BSD-3-Clause
"""Atomic checkpoint files: a crash mid-write never leaves a truncated `model_*.pt`."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import torch

_CHECKPOINT = re.compile(r"model_(\d+)\.pt$")


def save_atomic(obj: dict, path: str | Path) -> Path:
    """Write to a temporary file in the same folder, fsync it, then rename over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Load a checkpoint with `weights_only=True` (no arbitrary code from pickles)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    try:
        return torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:
        raise RuntimeError(f"checkpoint {path} is unreadable or corrupt: {err}") from err


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The `model_<iteration>.pt` with the highest iteration in a run folder, or None."""
    found = [(int(m.group(1)), p) for p in Path(run_dir).glob("model_*.pt") if (m := _CHECKPOINT.search(p.name))]
    return max(found)[1] if found else None
