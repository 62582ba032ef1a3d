# SPDX-License-Identifier: BSD-3-Clause
"""Per-joint parameter groups as `mujoco.sysid` parameters whose modifiers edit an MjSpec.

A group names one physical quantity of each listed joint: `armature` [kg·m²], `damping` [N·m·s/rad],
`frictionloss` [N·m] (absolute values), `kp` and `kd` (scales of the position actuator's nominal gains) and
`torque_limit` [N·m] (the actuator's symmetric force range). `mujoco.sysid` rebuilds the same spec at every
evaluation, so each modifier writes an absolute value computed from the nominal read here once. A shared group
(`*/<group>`) is one value for all the listed joints (one scale of each joint's nominal gain for kp and kd): the
data of every joint inform it, which identifies it under noise that hides a single joint's small effects.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
from mujoco import sysid

from batonlab.robots.fitted import FIT_GROUPS, FitOverlayError, group_value, set_group_value

if not hasattr(sysid, "optimize"):  # mujoco.sysid hides its missing dependencies behind an empty module
    raise ImportError("mujoco.sysid lacks its dependencies: pip install 'mujoco[sysid]' (batonlab[train] has them)")

SHARED = "*"
"""The joint part of a shared parameter's name (`*/damping`)."""

COARSE_GROUPS = ("armature", "damping", "frictionloss", "kp", "kd")
"""Groups a per-joint fit first fits shared (`coarse_parameters`); one torque limit means little across joints."""

_UPPER = {"armature": 0.1, "damping": 5.0, "frictionloss": 2.0}
"""The least upper bound of an absolute joint group [its units]: ten times the nominal where that is more."""


class SysidParameterError(ValueError):
    """An unknown group or joint, or a joint without the position actuator its group needs."""


def joint_parameters(spec: mujoco.MjSpec, joints: list[str], groups: list[str],
                     shared: bool = False) -> sysid.ParameterDict:
    """One parameter `<joint>/<group>` per joint and group (`*/<group>` per group when `shared`), at the spec's
    nominal value, with its bounds."""
    unknown = [g for g in groups if g not in FIT_GROUPS]
    if unknown:
        raise SysidParameterError(f"unknown parameter groups {unknown}; valid: {list(FIT_GROUPS)}")
    names = {j.name for j in spec.joints}
    missing = [j for j in joints if j not in names]
    if missing:
        raise SysidParameterError(f"joints {missing} are not in the model; its joints: {sorted(names)}")
    params = sysid.ParameterDict()
    for group in groups:
        for owner in ([SHARED] if shared else joints):
            params.add(_parameter(spec, joints if owner == SHARED else [owner], group, owner))
    return params


def joint_values(params: sysid.ParameterDict, nominal_spec: mujoco.MjSpec, joints: list[str],
                 numbers: dict[str, float] | None = None) -> dict[str, dict[str, float]]:
    """joint → group → the absolute value each parameter stands for (`numbers`: name → a number in the parameter's
    units instead of its value, e.g. a half-width), kp and kd scales times the joint's nominal gain."""
    out: dict[str, dict[str, float]] = {}
    for name, param in params.items():
        owner, group = name.rsplit("/", 1)
        number = float(param.value[0]) if numbers is None else numbers.get(name, math.inf)
        for joint in joints if owner == SHARED else [owner]:
            scale = group_value(nominal_spec, joint, group) if group in ("kp", "kd") else 1.0
            out.setdefault(joint, {})[group] = number * scale
    return out


def coarse_parameters(spec: mujoco.MjSpec, joints: list[str], groups: list[str]) -> sysid.ParameterDict | None:
    """The shared groups a per-joint fit of `groups` over `joints` goes coarse to fine from (None for a single joint
    or where no group of `COARSE_GROUPS` is asked for)."""
    shared = [g for g in groups if g in COARSE_GROUPS]
    if len(joints) < 2 or not shared:
        return None
    return joint_parameters(spec, joints, shared, shared=True)


def start_from_shared(params: sysid.ParameterDict, shared: sysid.ParameterDict) -> sysid.ParameterDict:
    """A copy of per-joint `params` with each `<joint>/<group>` at the value of `shared`'s `*/<group>` (within its
    bounds; groups `shared` lacks keep their values)."""
    start = params.copy()
    for name, param in start.items():
        group = name.rsplit("/", 1)[1]
        if f"{SHARED}/{group}" in shared:
            param.value[:] = np.clip(shared[f"{SHARED}/{group}"].value, param.min_value, param.max_value)
    return start


def _parameter(spec: mujoco.MjSpec, joints: list[str], group: str, owner: str) -> sysid.Parameter:
    name = f"{owner}/{group}"
    try:
        nominals = [group_value(spec, joint, group) for joint in joints]
    except FitOverlayError as err:
        raise SysidParameterError(str(err)) from None

    def write(s: mujoco.MjSpec, p: sysid.Parameter) -> None:
        for joint, nominal in zip(joints, nominals):
            set_group_value(s, joint, group, nominal * p.value[0] if group in ("kp", "kd") else p.value[0])

    if group in ("kp", "kd"):
        return sysid.Parameter(name, 1.0, 0.25, 4.0, modifier=write)
    nominal = sum(nominals) / len(nominals)
    if group in _UPPER:
        return sysid.Parameter(name, nominal, 0.0, max(10.0 * max(nominals), _UPPER[group]), modifier=write)
    if not all(0.0 < n < math.inf for n in nominals):
        raise SysidParameterError(f"{owner}: an actuator without a force range; torque_limit fits one")
    return sysid.Parameter(name, nominal, 0.2 * min(nominals), 2.0 * max(nominals), modifier=write)
