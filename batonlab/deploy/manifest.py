# SPDX-License-Identifier: BSD-3-Clause
"""Loading and validating `manifest.json` (written by `batonlab export`) on the robot.

The manifest is the contract between training and the robot: a runtime that cannot read every
field it needs, or whose ONNX file is not the one the manifest was written for, refuses to start.
Only the standard library and numpy are used here.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

SUPPORTED_SCHEMA_VERSIONS = (1,)
"""Manifest schema versions this runtime reads."""

ACTION_TYPES = ("joint_position", "joint_velocity", "joint_effort")
"""Action term types this runtime can post-process."""


class ManifestError(ValueError):
    """A manifest that is missing, malformed, inconsistent or does not match its ONNX file."""


@dataclass(frozen=True)
class ObsTermSpec:
    """One observation term as training computed it: value → clip → scale → history."""

    name: str
    func: str
    """Training function as "module:qualname", e.g. "batonlab.env.mdp:joint_pos_rel"."""
    params: dict[str, Any]
    size: int
    """Width of one frame."""
    scale: float
    clip: tuple[float, float] | None
    history_length: int
    """Stacked frames (0: the current frame only)."""

    @property
    def width(self) -> int:
        """Columns the term occupies in the observation vector."""
        return self.size * max(1, self.history_length)


@dataclass(frozen=True)
class ActionSpec:
    """One action term: `target = offset + scale * clip(raw)` for its joints."""

    name: str
    type: str
    joints: tuple[str, ...]
    scale: np.ndarray
    offset: np.ndarray
    clip: tuple[float, float] | None


@dataclass(frozen=True)
class Manifest:
    """A validated manifest; per-joint arrays are in policy (action) order."""

    task: str
    onnx_path: Path | None
    """The ONNX file next to the manifest (None for a manifest built in memory)."""
    input_name: str
    output_name: str
    obs_dim: int
    action_dim: int
    control_dt: float
    """Control period [s]."""
    joint_names: tuple[str, ...]
    default_pos: np.ndarray
    """Default pose of the action joints [rad or m]."""
    pos_limits: np.ndarray
    """(num_joints, 2) position limits, ±inf where unlimited [rad or m]."""
    torque_limits: np.ndarray
    """(num_joints,) actuator force limits, inf where unlimited [N·m or N]."""
    kp: np.ndarray
    """Position gains of the PD actuators used in training [N·m/rad]."""
    kd: np.ndarray
    """Damping gains [N·m·s/rad]."""
    actions: tuple[ActionSpec, ...]
    obs_terms: tuple[ObsTermSpec, ...]
    commands: dict[str, dict[str, Any]]
    """Command terms by name: {"type": class name, "dim": int}."""
    default_joint_pos: dict[str, float]
    """Default position of every 1-DoF joint of the training scene, by name (falls back to the action joints)."""
    raw: dict[str, Any] = field(repr=False)
    """The manifest as read, for logging."""

    @property
    def control_rate_hz(self) -> float:
        return 1.0 / self.control_dt


def load_manifest(path: str | Path, verify_hash: bool = True) -> Manifest:
    """Read `manifest.json` (or the export folder holding it) and check it against its ONNX file.

    Args:
        path: The manifest file or the folder written by `batonlab export`.
        verify_hash: Check the ONNX file's sha256 against the manifest (leave on outside tests).

    Raises:
        ManifestError: with a message naming the file and the offending field.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "manifest.json"
    if not path.is_file():
        raise ManifestError(f"manifest not found: {path}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ManifestError(f"{path}: not valid JSON ({err})") from None
    manifest = parse_manifest(data, where=str(path), base_dir=path.parent)
    if manifest.onnx_path is None or not manifest.onnx_path.is_file():
        raise ManifestError(f"{path}: policy file {manifest.onnx_path} does not exist")
    if verify_hash:
        expected = data["policy"].get("sha256")
        if not expected:
            raise ManifestError(f"{path}: policy.sha256 is empty; re-export the policy with `batonlab export`")
        actual = sha256_file(manifest.onnx_path)
        if actual != expected:
            raise ManifestError(
                f"{path}: {manifest.onnx_path.name} has sha256 {actual[:12]}…, the manifest expects {expected[:12]}…; "
                "the ONNX file and the manifest come from different exports (copy both files together)"
            )
    return manifest


def parse_manifest(data: dict[str, Any], where: str = "manifest", base_dir: Path | None = None) -> Manifest:
    """Validate a manifest dictionary (schema version, required fields, sizes) into a `Manifest`."""
    if not isinstance(data, dict):
        raise ManifestError(f"{where}: expected a JSON object, got {type(data).__name__}")
    version = data.get("schema_version")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        raise ManifestError(
            f"{where}: schema_version {version!r} is not supported; this runtime reads {list(SUPPORTED_SCHEMA_VERSIONS)}"
        )
    get = _Getter(data, where)
    policy, control, joints = get.section("policy"), get.section("control"), get.section("joints")
    names = tuple(get.field(joints, "joints", "names", list))
    n = len(names)
    if len(set(names)) != n:
        raise ManifestError(f"{where}: joints.names has duplicates: {sorted({j for j in names if names.count(j) > 1})}")

    def per_joint(key: str, fill: float) -> np.ndarray:
        values = get.field(joints, "joints", key, list)
        if len(values) != n:
            raise ManifestError(f"{where}: joints.{key} has {len(values)} values for {n} joints")
        return _floats(values, fill, f"{where}: joints.{key}")

    pos_limits_raw = get.field(joints, "joints", "pos_limits", list)
    if len(pos_limits_raw) != n or any(not isinstance(r, list) or len(r) != 2 for r in pos_limits_raw):
        raise ManifestError(f"{where}: joints.pos_limits must hold one [low, high] pair per joint")
    pos_limits = np.array(
        [[-np.inf if lo is None else float(lo), np.inf if hi is None else float(hi)] for lo, hi in pos_limits_raw]
    )

    actions = []
    for k, a in enumerate(get.field(data, "", "actions", list)):
        label = f"actions[{k}]"
        a_type = get.field(a, label, "type", str)
        if a_type not in ACTION_TYPES:
            raise ManifestError(f"{where}: {label}.type '{a_type}' is not supported; known types: {list(ACTION_TYPES)}")
        a_joints = tuple(get.field(a, label, "joints", list))
        scale = _floats(get.field(a, label, "scale", list), np.nan, f"{where}: {label}.scale")
        offset = _floats(get.field(a, label, "offset", list), np.nan, f"{where}: {label}.offset")
        if len(scale) != len(a_joints) or len(offset) != len(a_joints):
            raise ManifestError(f"{where}: {label} needs one scale and one offset per joint")
        clip = a.get("clip")
        actions.append(ActionSpec(get.field(a, label, "name", str), a_type, a_joints, scale, offset, _clip(clip, f"{where}: {label}.clip")))
    action_joints = tuple(j for a in actions for j in a.joints)
    if action_joints != names:
        raise ManifestError(f"{where}: the action terms' joints {list(action_joints)} are not joints.names {list(names)}")
    action_dim = int(get.field(policy, "policy", "action_dim", int))
    if action_dim != n:
        raise ManifestError(f"{where}: policy.action_dim is {action_dim} but there are {n} action joints")

    observations = get.section("observations")
    terms = []
    for k, t in enumerate(get.field(observations, "observations", "terms", list)):
        label = f"observations.terms[{k}]"
        size, history = int(get.field(t, label, "size", int)), int(get.field(t, label, "history_length", int))
        if size < 1 or history < 0:
            raise ManifestError(f"{where}: {label} has size {size} and history_length {history}")
        terms.append(
            ObsTermSpec(
                name=get.field(t, label, "name", str),
                func=get.field(t, label, "func", str),
                params=dict(t.get("params") or {}),
                size=size,
                scale=float(get.field(t, label, "scale", (int, float))),
                clip=_clip(t.get("clip"), f"{where}: {label}.clip"),
                history_length=history,
            )
        )
    obs_dim = int(get.field(policy, "policy", "obs_dim", int))
    if sum(t.width for t in terms) != obs_dim:
        raise ManifestError(f"{where}: observation terms add up to {sum(t.width for t in terms)} columns, policy.obs_dim is {obs_dim}")

    dt = float(get.field(control, "control", "dt", (int, float)))
    if not dt > 0:
        raise ManifestError(f"{where}: control.dt must be > 0, got {dt}")
    commands = {}
    for name, c in (data.get("commands") or {}).items():
        commands[name] = {"type": str(c.get("type", "")), "dim": int(get.field(c, f"commands.{name}", "dim", int))}
    default_pos = per_joint("default_pos", np.nan)
    by_name = dict(zip(names, default_pos.tolist()))
    by_name.update({str(k): float(v) for k, v in (data.get("default_joint_pos") or {}).items()})
    onnx_file = get.field(policy, "policy", "file", str)
    return Manifest(
        task=str(data.get("task", "")),
        onnx_path=(base_dir / onnx_file) if base_dir is not None else None,
        input_name=get.field(policy, "policy", "input_name", str),
        output_name=get.field(policy, "policy", "output_name", str),
        obs_dim=obs_dim,
        action_dim=action_dim,
        control_dt=dt,
        joint_names=names,
        default_pos=default_pos,
        pos_limits=pos_limits,
        torque_limits=per_joint("torque_limits", np.inf),
        kp=per_joint("kp", np.nan),
        kd=per_joint("kd", np.nan),
        actions=tuple(actions),
        obs_terms=tuple(terms),
        commands=commands,
        default_joint_pos=by_name,
        raw=data,
    )


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# Private helpers.


class _Getter:
    """Required-field access with errors that name the file and the field."""

    def __init__(self, data: dict, where: str):
        self.data, self.where = data, where

    def section(self, key: str) -> dict:
        return self.field(self.data, "", key, dict)

    def field(self, obj: dict, label: str, key: str, types):
        name = f"{label}.{key}" if label else key
        if not isinstance(obj, dict) or key not in obj or obj[key] is None:
            raise ManifestError(f"{self.where}: required field '{name}' is missing")
        value = obj[key]
        if not isinstance(value, types) or (types is int and isinstance(value, bool)):
            expected = types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
            raise ManifestError(f"{self.where}: field '{name}' should be {expected}, got {type(value).__name__}")
        return value


def _floats(values: list, fill: float, where: str) -> np.ndarray:
    """JSON lists with null for unbounded values → float64 array."""
    try:
        out = np.array([fill if v is None else float(v) for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        raise ManifestError(f"{where}: expected numbers, got {values!r}") from None
    if np.isnan(out).any():
        raise ManifestError(f"{where}: null where a number is required: {values!r}")
    return out


def _clip(value, where: str) -> tuple[float, float] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ManifestError(f"{where}: expected [low, high] or null, got {value!r}")
    return float(value[0]), float(value[1])
