# SPDX-License-Identifier: BSD-3-Clause
"""Applying `env.*` / `agent.*` command-line overrides to config dataclasses.

Hydra parses every override (so `x=[1,2]`, `~key` and quoting behave as in any hydra app); the
top-level options go through hydra's compose, while the task and agent configs stay typed
dataclasses (they hold term functions, which OmegaConf cannot store). Unknown keys fail with the
list of valid names at that level.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hydra.core.override_parser.overrides_parser import OverridesParser


def parse(overrides: list[str]):
    return OverridesParser.create().parse_overrides(overrides)


def apply_override(root: Any, key: str, value: Any, delete: bool = False, root_name: str = "") -> None:
    """Set (or delete, for dict entries) `root.<key>`, walking dataclass fields and dict keys."""
    parts = key.split(".")
    node, path = root, root_name
    for part in parts[:-1]:
        node = _child(node, part, path)
        path = f"{path}.{part}" if path else part
    last = parts[-1]
    if isinstance(node, dict):
        if last not in node:
            if delete:
                raise KeyError(f"cannot delete '{path}.{last}': valid keys are {sorted(node)}")
            raise KeyError(f"unknown key '{path}.{last}'; valid keys: {sorted(node)}")
        if delete:
            del node[last]
        else:
            node[last] = _coerce(node[last], value, f"{path}.{last}")
        return
    if not dataclasses.is_dataclass(node):
        raise KeyError(f"'{path}' is a {type(node).__name__}, it has no key '{last}'")
    names = [f.name for f in dataclasses.fields(node)]
    if last not in names:
        raise KeyError(f"unknown key '{path}.{last}'; valid keys: {names}")
    if delete:
        setattr(node, last, None)
    else:
        setattr(node, last, _coerce(getattr(node, last), value, f"{path}.{last}"))


def _child(node: Any, part: str, path: str) -> Any:
    if isinstance(node, dict):
        if part not in node:
            raise KeyError(f"unknown key '{path}.{part}'; valid keys: {sorted(node)}")
        return node[part]
    if dataclasses.is_dataclass(node):
        names = [f.name for f in dataclasses.fields(node)]
        if part not in names:
            raise KeyError(f"unknown key '{path}.{part}'; valid keys: {names}")
        return getattr(node, part)
    raise KeyError(f"'{path}' is a {type(node).__name__}, it has no key '{part}'")


def _coerce(old: Any, new: Any, where: str) -> Any:
    """Keep the config's types: ints stay ints, floats accept ints, tuples stay tuples."""
    if isinstance(old, bool) or old is None:
        return new
    if isinstance(old, float) and isinstance(new, (int, float)) and not isinstance(new, bool):
        return float(new)
    if isinstance(old, int) and isinstance(new, int) and not isinstance(new, bool):
        return new
    if isinstance(old, tuple) and isinstance(new, list):
        return tuple(new)
    if isinstance(old, (int, float)) and not isinstance(new, (int, float)):
        raise TypeError(f"{where} expects a number, got {new!r}")
    if isinstance(old, str) and not isinstance(new, str):
        return str(new)
    return new
