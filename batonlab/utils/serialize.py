# SPDX-License-Identifier: BSD-3-Clause
"""Turning configs into plain data (YAML/JSON): callables become `module:qualname` strings."""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import numpy as np
import torch

from batonlab.utils.files import atomic_write_text


def to_plain(obj: Any) -> Any:
    """A JSON/YAML-safe copy of a config: dataclasses → dicts, tuples → lists, functions → names."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_plain(v) for v in obj]
    if isinstance(obj, (np.ndarray, torch.Tensor)):
        return np.asarray(obj.tolist() if isinstance(obj, torch.Tensor) else obj).tolist()
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return obj.item()
    if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismethod(obj) or callable(obj):
        return f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', type(obj).__qualname__)}"
    if isinstance(obj, Path):
        return str(obj)
    return obj


def write_yaml(data: Any, path: str | Path) -> Path:
    """`data` as plain YAML to `path`, atomically (a reader sees the old file or the whole new one)."""
    import yaml

    return atomic_write_text(path, yaml.safe_dump(to_plain(data), sort_keys=False))
