# SPDX-License-Identifier: BSD-3-Clause
"""A node's safety parameters, generated from `SafetyCfg`: flat names, defaults and descriptions, and back.

`SafetyCfg` (and its `PlausibilityCfg`) is the one definition of the safety defaults. A node declares
one parameter per field, under the field's name (the plausibility fields as `sensor_*`), with the
field's default and attribute docstring. Parameters have no None: a field whose default is None
(use the robot's or a derived value) takes 0.0 or "" as its parameter default, which means the same.
Two fields are not flat parameters: `stop_pose` (one `stop_pose.<joint>` per joint, declared by the
node) and `estop_heartbeat_timeout_s`, whose parameter holds the heartbeat mode's timeout and is used
only when the node's `estop_mode` is "heartbeat".
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from dataclasses import dataclass

from batonlab.deploy.joints import PlausibilityCfg
from batonlab.deploy.safety import DEFAULT_ESTOP_HEARTBEAT_TIMEOUT_S, SafetyCfg

__all__ = ["SAFETY_PARAMETERS", "SafetyParam", "safety_cfg_from_params"]

_PLAUSIBILITY_NAMES = {"range_tolerance": "sensor_range_tolerance", "max_speed": "sensor_max_joint_speed",
                       "jump_tolerance": "sensor_jump_tolerance"}
"""Parameter names of the `PlausibilityCfg` fields (`SafetyCfg.plausibility`)."""
_PER_JOINT = ("stop_pose",)
"""`SafetyCfg` fields a node declares per joint, not as one parameter."""
_TYPES = {"float": float, "int": int, "bool": bool, "str": str}


@dataclass(frozen=True)
class SafetyParam:
    """One safety parameter of a node and the `SafetyCfg` field it sets."""

    name: str
    """Parameter name."""
    field: str
    """Field of `SafetyCfg`, or of its `plausibility` (`PlausibilityCfg`) for the `sensor_*` parameters."""
    default: float | int | bool | str
    """The field's default, or for a field whose default is None the value that means None (0.0, "")."""
    unset: float | str | None
    """The parameter value that sets the field to None; None where the field cannot be None."""
    description: str
    """The field's attribute docstring."""


def _field_docs(cls) -> dict[str, str]:
    """Attribute docstrings of a dataclass, joined onto one line ("" where the source cannot be read)."""
    try:
        tree = ast.parse(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body
    docs = {}
    for stmt, after in zip(body, body[1:]):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant) and isinstance(after.value.value, str)):
            docs[stmt.target.id] = " ".join(after.value.value.split())
    return docs


def _params_of(cls, names: dict[str, str] | None) -> list[SafetyParam]:
    docs = _field_docs(cls)
    params = []
    for f in dataclasses.fields(cls):
        if f.name in _PER_JOINT or f.name == "plausibility":
            continue
        kind = f.type if isinstance(f.type, type) else _TYPES[f.type.split("|")[0].strip()]
        if f.name == "estop_heartbeat_timeout_s":  # None is the latch mode, chosen by the node's estop_mode
            unset, default = None, DEFAULT_ESTOP_HEARTBEAT_TIMEOUT_S
        elif f.default is None:
            unset = default = 0.0 if kind is float else ""
        else:
            unset, default = None, kind(f.default)
        name = names[f.name] if names else f.name
        params.append(SafetyParam(name, f.name, default, unset, docs.get(f.name, "")))
    return params


SAFETY_PARAMETERS: tuple[SafetyParam, ...] = (*_params_of(SafetyCfg, None),
                                              *_params_of(PlausibilityCfg, _PLAUSIBILITY_NAMES))
"""Every flat safety parameter, in field order (`SafetyCfg`'s, then the plausibility fields)."""


def safety_cfg_from_params(p: dict, heartbeat: bool, stop_pose: dict[str, float] | None = None) -> SafetyCfg:
    """The `SafetyCfg` that parameter values `p` (by `SafetyParam.name`) set.

    Args:
        heartbeat: The e-stop is a heartbeat (`estop_heartbeat_timeout_s` is used), not a latch.
        stop_pose: The crouch pose (None: the manifest's).

    Raises:
        ValueError: settings `SafetyCfg` rejects.
    """
    top, plausibility = {}, {}
    for param in SAFETY_PARAMETERS:
        value = p[param.name]
        if param.unset is not None and value == param.unset:
            value = None
        (plausibility if param.name in _PLAUSIBILITY_NAMES.values() else top)[param.field] = value
    if not heartbeat:
        top["estop_heartbeat_timeout_s"] = None
    return SafetyCfg(**top, stop_pose=stop_pose, plausibility=PlausibilityCfg(**plausibility))
