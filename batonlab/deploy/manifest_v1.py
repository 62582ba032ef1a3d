# SPDX-License-Identifier: BSD-3-Clause
"""Version-1 manifests (written by batonlab ≤ 0.1), read as the version-2 dictionary they stand for.

Version 1 stored several values more than once; here each is checked against its twin and one is kept:

- the default pose (`joints.default_pos`, `default_joint_pos`, `actions[].offset`) → `default_joint_pos`,
  and `use_default_offset` for an action term whose offset is its joints' default pose;
- the rate (`control.dt`, `control.rate_hz`, `control.physics_dt` × `control.decimation`) →
  `physics_dt` and `decimation` (a file without them: `dt` and 1);
- `policy.obs_dim` and `policy.action_dim`, which the observation terms and the joints imply.

Version 1 has no actuator control range: `joints.ctrl_range` is unlimited.
"""

from __future__ import annotations

import math
from typing import Any

from batonlab.deploy.manifest_json import ManifestError, numbers, required, required_number

_OFFSET_TOLERANCE = 1e-6
"""An action offset this close to the default pose [rad or m] is the default pose (both are float32 in training)."""


def upgrade_v1(data: dict[str, Any]) -> dict[str, Any]:
    """The version-2 manifest dictionary of a version-1 one.

    Raises:
        ManifestError: a required version-1 field is missing, or two copies of a value disagree.
    """
    policy, control, joints = (required(data, "", key, dict) for key in ("policy", "control", "joints"))
    names = required(joints, "joints", "names", list)
    n = len(names)
    default_pos = numbers(required(joints, "joints", "default_pos", list), "joints.default_pos")
    if len(default_pos) != n:
        raise ManifestError(f"joints.default_pos has {len(default_pos)} values for {n} joints")
    default_joint_pos = dict(zip(names, default_pos))
    scene_defaults = data.get("default_joint_pos") or {}
    if not isinstance(scene_defaults, dict):
        raise ManifestError(f"field 'default_joint_pos' should be an object, got {type(scene_defaults).__name__}")
    default_joint_pos.update(zip(map(str, scene_defaults), numbers(list(scene_defaults.values()), "default_joint_pos")))

    action_dim = required(policy, "policy", "action_dim", int)
    if action_dim != n:
        raise ManifestError(f"policy.action_dim is {action_dim} but there are {n} action joints")
    actions = [_action_term(a, f"actions[{k}]", default_joint_pos) for k, a in enumerate(required(data, "", "actions", list))]

    observations = required(data, "", "observations", dict)
    width = 0
    for k, t in enumerate(required(observations, "observations", "terms", list)):
        label = f"observations.terms[{k}]"
        width += required(t, label, "size", int) * max(1, required(t, label, "history_length", int))
    obs_dim = required(policy, "policy", "obs_dim", int)
    if width != obs_dim:
        raise ManifestError(f"observation terms add up to {width} columns, policy.obs_dim is {obs_dim}")

    return {
        "schema_version": 2,
        "batonlab_version": data.get("batonlab_version", ""),
        "task": data.get("task", ""),
        "policy": {key: policy.get(key) for key in ("file", "sha256", "input_name", "output_name")},
        "control": _control(control),
        "joints": {**{key: joints[key] for key in ("names", "pos_limits", "torque_limits", "kp", "kd") if key in joints},
                   "ctrl_range": [[None, None]] * n},
        "default_joint_pos": default_joint_pos,
        "actions": actions,
        "observations": observations,
        "commands": data.get("commands") or {},
        "training_config": data.get("training_config") or {},
    }


def _control(control: dict) -> dict[str, Any]:
    dt = required_number(control, "control", "dt")
    if not dt > 0:
        raise ManifestError(f"control.dt must be > 0, got {dt}")
    physics_dt, decimation = control.get("physics_dt"), control.get("decimation")
    if physics_dt is None or decimation is None:
        return {"physics_dt": dt, "decimation": 1}
    physics_dt, decimation = required_number(control, "control", "physics_dt"), required(control, "control", "decimation", int)
    if not math.isclose(physics_dt * decimation, dt, rel_tol=1e-9):
        raise ManifestError(f"control.dt {dt} is not control.physics_dt × control.decimation ({physics_dt} × {decimation})")
    return {"physics_dt": physics_dt, "decimation": decimation}


def _action_term(term: dict, label: str, default_joint_pos: dict[str, float]) -> dict[str, Any]:
    """`offset` → `use_default_offset`: version 2 expresses an offset that is the default pose or zero."""
    joints = required(term, label, "joints", list)
    offset = numbers(required(term, label, "offset", list), f"{label}.offset")
    if len(offset) != len(joints):
        raise ManifestError(f"{label} needs one scale and one offset per joint")
    defaults = [default_joint_pos.get(j) for j in joints]
    use_default = None not in defaults and all(abs(o - d) <= _OFFSET_TOLERANCE for o, d in zip(offset, defaults))
    if not use_default and any(offset):
        raise ManifestError(f"{label}.offset {list(offset)} is neither the default pose of its joints nor zero; "
                            "re-export the policy with `batonlab export`")
    return {**{key: value for key, value in term.items() if key != "offset"}, "use_default_offset": use_default}
