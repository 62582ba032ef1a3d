# SPDX-License-Identifier: BSD-3-Clause
"""Reading and writing manifest JSON: required fields whose errors name the field, and the numbers
JSON cannot hold (an unlimited bound is written as null and read as ±inf).

Shared by the typed manifest (`batonlab.deploy.manifest`, `batonlab.deploy.manifest_sections`) and
the reader of version-1 files (`batonlab.deploy.manifest_v1`). Messages name the field;
`parse_manifest` puts the file in front.
"""

from __future__ import annotations

import math
from typing import Any


class ManifestError(ValueError):
    """A manifest that is missing, malformed, inconsistent or does not match its ONNX file."""


def required(obj: Any, label: str, key: str, types):
    """`obj[key]`, present, not null and of `types`; `label` is the path of `obj` in the manifest."""
    name = f"{label}.{key}" if label else key
    if not isinstance(obj, dict) or key not in obj or obj[key] is None:
        raise ManifestError(f"required field '{name}' is missing")
    value = obj[key]
    if not isinstance(value, types) or (types is int and isinstance(value, bool)):
        expected = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
        raise ManifestError(f"field '{name}' should be {expected}, got {type(value).__name__}")
    return value


def required_number(obj: Any, label: str, key: str) -> float:
    """`obj[key]` as a float, present, not null and an int or a float; `label` is the path of `obj`."""
    return float(required(obj, label, key, (int, float)))


def numbers(values: list, name: str, null: float | None = None) -> tuple[float, ...]:
    """A list of numbers; JSON nulls become `null` (None: a null is an error)."""
    out = []
    for v in values:
        if v is None and null is not None:
            out.append(null)
        elif isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v):
            out.append(float(v))
        else:
            raise ManifestError(f"{name}: expected numbers{' or null' if null is not None else ''}, got {values!r}")
    return tuple(out)


def bounds(values: list, name: str) -> tuple[tuple[float, float], ...]:
    """[low, high] pairs, null for unlimited (→ -inf / +inf)."""
    if any(not isinstance(r, list) or len(r) != 2 for r in values):
        raise ManifestError(f"{name} must hold one [low, high] pair per joint")
    return tuple((numbers(r[:1], name, -math.inf)[0], numbers(r[1:], name, math.inf)[0]) for r in values)


def clip_range(value: Any, name: str) -> tuple[float, float] | None:
    """[low, high] or null."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ManifestError(f"{name}: expected [low, high] or null, got {value!r}")
    low, high = numbers(list(value), name)
    return low, high


def finite_or_null(value: float) -> float | None:
    """JSON has no infinity: an unlimited bound is written as null."""
    return float(value) if math.isfinite(value) else None
