# SPDX-License-Identifier: BSD-3-Clause
"""Isaac Lab's IO-descriptor files, read into typed, checked records (`IoDescriptors`).

Design and contract notes: docs/modules/batonlab.deploy.isaaclab_descriptors.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["ActionDescriptor", "ArticulationDescriptor", "IoDescriptors", "IsaacLabImportError", "ObsDescriptor",
           "load_io_descriptors", "parse_io_descriptors"]


class IsaacLabImportError(ValueError):
    """An IO-descriptor file, policy or robot description that cannot become a batonlab export; the message names it."""


@dataclass(frozen=True)
class ActionDescriptor:
    """One action term: `target = clamp(offset + scale · raw, clip)` per joint."""

    name: str
    full_path: str
    """The term's class, e.g. "isaaclab.envs.mdp.actions.joint_actions.JointPositionAction"."""
    joint_names: tuple[str, ...]
    scale: tuple[float, ...]
    """Per joint."""
    offset: tuple[float, ...]
    """Per joint [rad or rad/s]."""
    clip: tuple[tuple[float, float], ...]
    """Per joint, bounds of the target (±inf: unclipped)."""
    label: str
    """Where the term sits in the file, for messages."""


@dataclass(frozen=True)
class ObsDescriptor:
    """One observation term of a group."""

    name: str
    full_path: str
    """The term's function, e.g. "isaaclab.envs.mdp.observations.joint_pos_rel"."""
    size: int
    """Width of one frame."""
    scale: tuple[float, ...] | None
    """One value for the whole term, or one per element; None: unscaled."""
    clip: tuple[float, float] | None
    history_length: int
    """Stacked frames (0: the current frame only)."""
    flatten_history_dim: bool
    joint_names: tuple[str, ...] | None
    joint_pos_offsets: tuple[float, ...] | None
    joint_vel_offsets: tuple[float, ...] | None
    modifiers: Any
    """Isaac Lab's modifiers of the term (None when it has none)."""
    label: str

    @property
    def width(self) -> int:
        """Columns the term occupies in the policy input."""
        return self.size * max(1, self.history_length)


@dataclass(frozen=True)
class ArticulationDescriptor:
    """An articulation's joints as the simulator held them, in its own joint order."""

    name: str
    joint_names: tuple[str, ...]
    default_joint_pos: tuple[float, ...]
    """[rad]"""
    pos_limits: tuple[tuple[float, float], ...]
    """[rad]"""
    stiffness: tuple[float, ...] | None
    """The physics drives' gains [N·m/rad]: an implicit actuator's, zero for an explicit actuator."""
    damping: tuple[float, ...] | None
    """[N·m·s/rad], as `stiffness`."""

    def by_joint(self, values) -> dict[str, Any]:
        """`values` keyed by joint name, in the articulation's joint order."""
        return dict(zip(self.joint_names, values))


@dataclass(frozen=True)
class IoDescriptors:
    """A whole IO-descriptor file."""

    actions: tuple[ActionDescriptor, ...]
    observations: dict[str, tuple[ObsDescriptor, ...]]
    """Group name → its terms, in order."""
    articulations: dict[str, ArticulationDescriptor]
    physics_dt: float
    """[s]"""
    decimation: int
    """Physics steps per policy step."""
    raw: dict
    """The file as read, for reference."""

    def articulation_of(self, joints) -> ArticulationDescriptor:
        """The articulation holding every joint of `joints`."""
        for articulation in self.articulations.values():
            if set(joints) <= set(articulation.joint_names):
                return articulation
        raise IsaacLabImportError(f"no articulation in section 'articulations' ({sorted(self.articulations)}) has every "
                                  f"joint the actions drive: {list(joints)}")


def load_io_descriptors(path: str | Path) -> IoDescriptors:
    """Read and check an IO-descriptor YAML file.

    Raises:
        IsaacLabImportError: the file is missing, is not YAML, or breaks the format (the message names
            the file and the field).
    """
    path = Path(path)
    if not path.is_file():
        raise IsaacLabImportError(f"IO-descriptor file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text())
    except UnicodeDecodeError:
        raise IsaacLabImportError(f"{path}: not a text file (expected Isaac Lab's IO-descriptor YAML)") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise IsaacLabImportError(f"{path}: not valid YAML ({problem}{line})") from None
    return parse_io_descriptors(data)


def parse_io_descriptors(data: Any) -> IoDescriptors:
    """Check the IO descriptors as read from YAML.

    Raises:
        IsaacLabImportError: naming the section, term and field that breaks the format.
    """
    if not isinstance(data, dict):
        raise IsaacLabImportError(f"expected a mapping with sections actions, observations, articulations and scene; "
                                  f"got {type(data).__name__}")
    actions = _section(data, "actions", list)
    if not actions:
        raise IsaacLabImportError("section 'actions' lists no action term")
    groups = _section(data, "observations", dict)
    articulations = _section(data, "articulations", dict)
    physics_dt, decimation = _timing(_section(data, "scene", dict))
    return IoDescriptors(
        actions=tuple(_action(a, k) for k, a in enumerate(actions)),
        observations={str(g): _group(str(g), terms) for g, terms in groups.items()},
        articulations={str(name): _articulation(str(name), art) for name, art in articulations.items()},
        physics_dt=physics_dt,
        decimation=decimation,
        raw=data,
    )


# Private helpers: sections.


def _section(data: dict, key: str, kind: type):
    if data.get(key) is None:
        raise IsaacLabImportError(f"the descriptors have no '{key}' section")
    if not isinstance(data[key], kind):
        raise IsaacLabImportError(f"section '{key}' should be a {kind.__name__}, got {type(data[key]).__name__}")
    return data[key]


def _timing(scene: dict) -> tuple[float, int]:
    physics_dt, decimation = scene.get("physics_dt"), scene.get("decimation")
    if not _is_number(physics_dt) or not physics_dt > 0:
        raise IsaacLabImportError(f"scene.physics_dt should be a positive number [s], got {physics_dt!r}")
    if not isinstance(decimation, int) or isinstance(decimation, bool) or decimation < 1:
        raise IsaacLabImportError(f"scene.decimation should be a positive integer, got {decimation!r}")
    dt = scene.get("dt")
    if dt is not None and (not _is_number(dt) or not math.isclose(dt, physics_dt * decimation, rel_tol=1e-6)):
        raise IsaacLabImportError(f"scene.dt {dt!r} is not physics_dt × decimation = {physics_dt} × {decimation}")
    return float(physics_dt), decimation


def _action(data: Any, k: int) -> ActionDescriptor:
    name = str(data.get("name") or f"action_{k}") if isinstance(data, dict) else f"action_{k}"
    label = f"action term '{name}' (actions[{k}])"
    if not isinstance(data, dict):
        raise IsaacLabImportError(f"{label} should be a mapping")
    joints = _joints(data, label, _size(data, label))
    n = len(joints)
    clip = data.get("clip")
    if clip is None:
        clip = [(-math.inf, math.inf)] * n
    elif isinstance(clip, list) and len(clip) == 2 and all(_is_number(v) for v in clip):
        clip = [clip] * n
    if not isinstance(clip, list) or len(clip) != n:
        raise IsaacLabImportError(f"{label}.clip should be null or one [low, high] per joint ({n})")
    return ActionDescriptor(name, str(data.get("full_path")), joints,
                            _per_joint(data.get("scale", 1.0), f"{label}.scale", n),
                            _per_joint(data.get("offset", 0.0), f"{label}.offset", n),
                            tuple(_pair(c, f"{label}.clip[{j}]") for j, c in enumerate(clip)), label)


def _group(group: str, terms: Any) -> tuple[ObsDescriptor, ...]:
    if not isinstance(terms, list) or not terms:
        raise IsaacLabImportError(f"observations.{group} should be a non-empty list of terms")
    return tuple(_obs_term(t, f"observations.{group}[{k}]") for k, t in enumerate(terms))


def _obs_term(data: Any, where: str) -> ObsDescriptor:
    if not isinstance(data, dict):
        raise IsaacLabImportError(f"{where} should be a mapping")
    label = f"observation term '{data.get('name')}' ({where})"
    if not isinstance(data.get("name"), str) or not isinstance(data.get("full_path"), str):
        raise IsaacLabImportError(f"{label} needs a name and a full_path")
    size = _size(data, label)
    overloads = data.get("overloads") or {}
    if not isinstance(overloads, dict):
        raise IsaacLabImportError(f"{label}.overloads should be a mapping, got {overloads!r}")
    history = overloads.get("history_length") or 0
    if not isinstance(history, int) or isinstance(history, bool) or history < 0:
        raise IsaacLabImportError(f"{label}: history_length should be an integer >= 0, got {history!r}")
    scale = overloads.get("scale")
    if scale is not None:
        scale = (float(scale),) if _is_number(scale) else _numbers(scale, f"{label}.overloads.scale", size)
    clip = overloads.get("clip")
    joints = _joints(data, label, size) if data.get("joint_names") is not None else None
    offsets = {}
    for key in ("joint_pos_offsets", "joint_vel_offsets"):
        if data.get(key) is not None:
            if joints is None:
                raise IsaacLabImportError(f"{label} has {key} but no joint_names")
            offsets[key] = _numbers(data[key], f"{label}.{key}", len(joints))
    return ObsDescriptor(data["name"], data["full_path"], size, scale,
                         _pair(clip, f"{label}.overloads.clip") if clip is not None else None, history,
                         overloads.get("flatten_history_dim", True) is not False, joints,
                         offsets.get("joint_pos_offsets"), offsets.get("joint_vel_offsets"),
                         (data.get("extras") or {}).get("modifiers"), label)


def _articulation(name: str, data: Any) -> ArticulationDescriptor:
    label = f"articulations.{name}"
    if not isinstance(data, dict):
        raise IsaacLabImportError(f"{label} should be a mapping")
    joints = data.get("joint_names")
    if not isinstance(joints, list) or not all(isinstance(j, str) for j in joints):
        raise IsaacLabImportError(f"{label}.joint_names should be a list of joint names")
    n = len(joints)
    limits = data.get("default_joint_pos_limits")
    if not isinstance(limits, list) or len(limits) != n:
        raise IsaacLabImportError(f"{label}.default_joint_pos_limits should hold one [low, high] per joint ({n})")
    gains = [_numbers(data[key], f"{label}.{key}", n) if data.get(key) is not None else None
             for key in ("default_joint_stiffness", "default_joint_damping")]
    return ArticulationDescriptor(name, tuple(joints), _numbers(data.get("default_joint_pos"), f"{label}.default_joint_pos", n),
                                  tuple(_pair(p, f"{label}.default_joint_pos_limits[{k}]") for k, p in enumerate(limits)),
                                  *gains)


# Private helpers: values.


def _size(data: dict, label: str) -> int:
    shape = data.get("shape")
    if not isinstance(shape, list) or len(shape) != 1 or not isinstance(shape[0], int) or shape[0] < 1:
        raise IsaacLabImportError(f"{label} has shape {shape!r}; batonlab reads flat terms ([width])")
    return shape[0]


def _joints(data: dict, label: str, size: int) -> tuple[str, ...]:
    joints = data.get("joint_names")
    if not isinstance(joints, list) or not joints or not all(isinstance(j, str) for j in joints):
        raise IsaacLabImportError(f"{label} names no joints (joint_names)")
    if len(joints) != size:
        raise IsaacLabImportError(f"{label} has shape [{size}] but {len(joints)} joint_names")
    return tuple(joints)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _numbers(values: Any, name: str, n: int) -> tuple[float, ...]:
    if not isinstance(values, list) or len(values) != n or not all(_is_number(v) for v in values):
        raise IsaacLabImportError(f"{name} should be a list of {n} numbers, got {values!r}")
    return tuple(float(v) for v in values)


def _per_joint(value: Any, name: str, n: int) -> tuple[float, ...]:
    """A number for every joint, or one per joint."""
    return (float(value),) * n if _is_number(value) else _numbers(value, name, n)


def _pair(value: Any, name: str) -> tuple[float, float]:
    """[low, high]; a null bound is unlimited."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise IsaacLabImportError(f"{name} should be [low, high], got {value!r}")
    low = -math.inf if value[0] is None else value[0]
    high = math.inf if value[1] is None else value[1]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (low, high)) or not low <= high:
        raise IsaacLabImportError(f"{name} should be [low, high] with low <= high, got {value!r}")
    return float(low), float(high)
