# SPDX-License-Identifier: BSD-3-Clause
"""A fitted overlay: per-joint values that `batonlab sysid` identified, written over a scene's MjSpec.

The overlay is a YAML file (`write_fit`, `read_fit`) that names joints and, for each, the values of some of
`FIT_GROUPS`: `armature` [kg·m²], `damping` [N·m·s/rad], `frictionloss` [N·m] of the joint; `kp` [N·m/rad],
`kd` [N·m·s/rad] and `torque_limit` [N·m] of the position actuator that drives it. Every value is absolute.
`command_delay_s` delays the actuators of `delayed_joints` (default: the fitted joints) by whole physics steps
(MuJoCo's actuator history, held values). A task loads one with `env.scene.fit=PATH` (applied by `Scene` before it
compiles the model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import yaml

FIT_GROUPS = ("armature", "damping", "frictionloss", "kp", "kd", "torque_limit")
"""The quantities a fit names per joint."""

FIT_FORMAT = "batonlab_fit/1"
"""The `format` key of an overlay file."""


class FitOverlayError(ValueError):
    """A malformed overlay file, or one that names a joint, group or actuator the model lacks."""


@dataclass
class FitOverlay:
    """Fitted values by joint and group, with the nominal values they replace and their 95 % half-widths."""

    values: dict[str, dict[str, float]]
    """joint → group → fitted value (units in the module docstring)."""
    nominal: dict[str, dict[str, float]] = field(default_factory=dict)
    half_width_95: dict[str, dict[str, float]] = field(default_factory=dict)
    """joint → group → half-width of the 95 % confidence interval (inf where the data do not identify it)."""
    source: dict = field(default_factory=dict)
    """What was fitted from: task, bags, held-out error before and after."""
    command_delay_s: float = 0.0
    """How late the actuators of `delayed_joints` apply their commands [s], a whole number of physics steps."""
    delayed_joints: list[str] = field(default_factory=list)
    """The joints whose commands `command_delay_s` delays (the commanded joints of the bags); empty: the fitted ones."""


def group_value(spec: mujoco.MjSpec, joint: str, group: str) -> float:
    """The value of `group` for `joint` in `spec` (an actuator group reads the joint's position actuator)."""
    if group in ("armature", "frictionloss"):
        return float(getattr(_joint(spec, joint), group))
    if group == "damping":
        return float(_joint(spec, joint).damping[0])  # MuJoCo 4: a polynomial's coefficients, the linear one first
    actuator = position_actuator(spec, joint)
    if group == "kp":
        return float(actuator.gainprm[0])
    if group == "kd":
        return float(-actuator.biasprm[2])
    if group == "torque_limit":
        return float(actuator.forcerange[1]) if actuator.forcelimited != mujoco.mjtLimited.mjLIMITED_FALSE else math.inf
    raise FitOverlayError(f"unknown group {group!r}; valid: {list(FIT_GROUPS)}")


def set_group_value(spec: mujoco.MjSpec, joint: str, group: str, value: float) -> None:
    """Write `value` (absolute) as `group` of `joint` in `spec`; the same call twice leaves the same spec."""
    if group in ("armature", "frictionloss"):
        setattr(_joint(spec, joint), group, float(value))
    elif group == "damping":
        _joint(spec, joint).damping[0] = float(value)
    elif group in ("kp", "kd", "torque_limit"):
        actuator = position_actuator(spec, joint)
        if group == "kp":
            actuator.gainprm[0], actuator.biasprm[1] = float(value), -float(value)
        elif group == "kd":
            actuator.biasprm[2] = -float(value)
        else:
            actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
            actuator.forcerange = [-float(value), float(value)]
    else:
        raise FitOverlayError(f"unknown group {group!r}; valid: {list(FIT_GROUPS)}")


def position_actuator(spec: mujoco.MjSpec, joint: str):
    """The position servo (fixed gain, affine bias −kp·q − kd·q̇) that drives `joint`."""
    for actuator in spec.actuators:
        if (actuator.trntype == mujoco.mjtTrn.mjTRN_JOINT and actuator.target == joint
                and actuator.gaintype == mujoco.mjtGain.mjGAIN_FIXED
                and actuator.biastype == mujoco.mjtBias.mjBIAS_AFFINE
                and actuator.gainprm[0] > 0 and actuator.gainprm[0] == -actuator.biasprm[1]):
            return actuator
    raise FitOverlayError(f"{joint}: no position actuator drives it (kp, kd and torque_limit belong to one)")


def apply_fit(spec: mujoco.MjSpec, overlay: FitOverlay) -> None:
    """Write every fitted value of `overlay` into `spec`."""
    for joint, groups in overlay.values.items():
        for group, value in groups.items():
            set_group_value(spec, joint, group, value)
    if overlay.command_delay_s > 0:
        set_command_delay(spec, overlay.delayed_joints or list(overlay.values), overlay.command_delay_s)


def set_command_delay(spec: mujoco.MjSpec, joints: list[str], delay_s: float, max_delay_s: float | None = None) -> None:
    """Delay the actuators of `joints` by `delay_s` [s] (rounded to physics steps), holding each past command; the
    history is sized for `max_delay_s` (default `delay_s`) so that the delay can change without resizing the state."""
    dt = float(spec.option.timestep)
    steps = round(delay_s / dt)
    room = round((delay_s if max_delay_s is None else max_delay_s) / dt)
    for actuator in spec.actuators:
        if actuator.trntype == mujoco.mjtTrn.mjTRN_JOINT and actuator.target in joints:
            actuator.nsample, actuator.interp, actuator.delay = room + 2, 0, steps * dt


def write_fit(path: str | Path, overlay: FitOverlay) -> Path:
    """Write `overlay` as YAML to `path` (through a temporary file: a reader never sees half of it)."""
    path = Path(path)
    joints = {joint: {group: {"value": value, **_extra(overlay, joint, group)} for group, value in groups.items()}
              for joint, groups in overlay.values.items()}
    text = yaml.safe_dump({"format": FIT_FORMAT, "command_delay_s": overlay.command_delay_s,
                           "delayed_joints": list(overlay.delayed_joints), "joints": joints, "source": overlay.source},
                          sort_keys=False)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path


def read_fit(path: str | Path) -> FitOverlay:
    """The overlay in `path`; a clear `FitOverlayError` for anything that is not one."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as err:
        raise FitOverlayError(f"{path}: cannot read the fit ({err.strerror})") from None
    except yaml.YAMLError as err:
        raise FitOverlayError(f"{path}: not YAML ({err})") from None
    if not isinstance(data, dict) or data.get("format") != FIT_FORMAT:
        raise FitOverlayError(f"{path}: not a fit written by `batonlab sysid` (no `format: {FIT_FORMAT}`)")
    joints = data.get("joints")
    if not isinstance(joints, dict) or not joints:
        raise FitOverlayError(f"{path}: `joints` must map joint names to fitted groups")
    delay = data.get("command_delay_s", 0.0)
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not 0.0 <= delay < 1.0:
        raise FitOverlayError(f"{path}: command_delay_s must be a number of seconds in [0, 1), got {delay!r}")
    delayed = data.get("delayed_joints") or []
    if not isinstance(delayed, list) or not all(isinstance(j, str) for j in delayed):
        raise FitOverlayError(f"{path}: delayed_joints must be a list of joint names, got {delayed!r}")
    overlay = FitOverlay(values={}, source=data.get("source") or {}, command_delay_s=float(delay),
                         delayed_joints=delayed)
    for joint, groups in joints.items():
        if not isinstance(groups, dict):
            raise FitOverlayError(f"{path}: joints.{joint} must map groups to values")
        for group, entry in groups.items():
            if group not in FIT_GROUPS:
                raise FitOverlayError(f"{path}: joints.{joint}.{group}: unknown group; valid: {list(FIT_GROUPS)}")
            value = entry.get("value") if isinstance(entry, dict) else entry
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise FitOverlayError(f"{path}: joints.{joint}.{group} must be a finite number >= 0, got {value!r}")
            overlay.values.setdefault(str(joint), {})[group] = float(value)
            for key, target in (("nominal", overlay.nominal), ("half_width_95", overlay.half_width_95)):
                if isinstance(entry, dict) and key in entry:
                    target.setdefault(str(joint), {})[group] = float(entry[key])
    return overlay


def check_fit(spec: mujoco.MjSpec, overlay: FitOverlay, where: str) -> None:
    """Refuse an overlay whose joints or actuators `spec` lacks, naming them and `where` it came from."""
    names = {j.name for j in spec.joints}
    unknown = sorted((set(overlay.values) | set(overlay.delayed_joints)) - names)
    if unknown:
        raise FitOverlayError(f"{where}: joints {unknown} are not in the model; its joints: {sorted(names)}")
    for joint, groups in overlay.values.items():
        if set(groups) & {"kp", "kd", "torque_limit"}:
            try:
                position_actuator(spec, joint)
            except FitOverlayError as err:
                raise FitOverlayError(f"{where}: {err}") from None


# Private functions.


def _joint(spec: mujoco.MjSpec, joint: str):
    found = spec.joint(joint)
    if found is None:
        raise FitOverlayError(f"joint {joint!r} is not in the model")
    return found


def _extra(overlay: FitOverlay, joint: str, group: str) -> dict[str, float]:
    out = {}
    for key, source in (("nominal", overlay.nominal), ("half_width_95", overlay.half_width_95)):
        if group in source.get(joint, {}):
            out[key] = float(source[joint][group])
    return out
