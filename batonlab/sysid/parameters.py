# SPDX-License-Identifier: BSD-3-Clause
"""Per-joint parameter groups as `mujoco.sysid` parameters whose modifiers edit an MjSpec.

A group names one physical quantity of each listed joint: `armature` [kg·m²], `damping` [N·m·s/rad],
`frictionloss` [N·m] (absolute values), `kp` and `kd` (scales of the position actuator's nominal gains) and
`torque_limit` [N·m] (the actuator's symmetric force range). `mujoco.sysid` rebuilds the same spec at every
evaluation, so each modifier writes an absolute value computed from the nominal read here once.
"""

from __future__ import annotations

import mujoco
from mujoco import sysid

if not hasattr(sysid, "optimize"):  # mujoco.sysid hides its missing dependencies behind an empty module
    raise ImportError("mujoco.sysid lacks its dependencies: pip install 'mujoco[sysid]' (batonlab[train] has them)")

GROUPS = ("armature", "damping", "frictionloss", "kp", "kd", "torque_limit")
"""The parameter groups a fit can name."""


class SysidParameterError(ValueError):
    """An unknown group or joint, or a joint without the position actuator its group needs."""


def joint_parameters(spec: mujoco.MjSpec, joints: list[str], groups: list[str]) -> sysid.ParameterDict:
    """One parameter `<joint>/<group>` per joint and group, at the spec's nominal value, with its bounds."""
    unknown = [g for g in groups if g not in GROUPS]
    if unknown:
        raise SysidParameterError(f"unknown parameter groups {unknown}; valid: {list(GROUPS)}")
    names = {j.name for j in spec.joints}
    missing = [j for j in joints if j not in names]
    if missing:
        raise SysidParameterError(f"joints {missing} are not in the model; its joints: {sorted(names)}")
    params = sysid.ParameterDict()
    for joint in joints:
        for group in groups:
            params.add(_parameter(spec, joint, group))
    return params


def _parameter(spec: mujoco.MjSpec, joint: str, group: str) -> sysid.Parameter:
    name = f"{joint}/{group}"
    if group in ("armature", "damping", "frictionloss"):
        nominal = _joint_value(spec, joint, group)
        high = max(10.0 * nominal, {"armature": 0.1, "damping": 5.0, "frictionloss": 2.0}[group])
        return sysid.Parameter(name, nominal, 0.0, high,
                               modifier=lambda s, p: _set_joint_value(s, joint, group, p.value[0]))
    actuator = _position_actuator(spec, joint)
    kp, kd = float(actuator.gainprm[0]), float(-actuator.biasprm[2])
    if group == "kp":
        return sysid.Parameter(name, 1.0, 0.25, 4.0,
                               modifier=lambda s, p: sysid.apply_pgain(s, actuator.name, kp * p.value[0]))
    if group == "kd":
        return sysid.Parameter(name, 1.0, 0.25, 4.0,
                               modifier=lambda s, p: sysid.apply_dgain(s, actuator.name, kd * p.value[0]))
    limit = float(actuator.forcerange[1])
    if not limit > 0.0:
        raise SysidParameterError(f"{joint}: its actuator {actuator.name!r} has no force range to fit")
    return sysid.Parameter(name, limit, 0.2 * limit, 2.0 * limit,
                           modifier=lambda s, p: _set_torque_limit(s, actuator.name, p.value[0]))


def _joint_value(spec: mujoco.MjSpec, joint: str, group: str) -> float:
    value = getattr(spec.joint(joint), group)
    return float(value[0]) if group == "damping" else float(value)


def _set_joint_value(spec: mujoco.MjSpec, joint: str, group: str, value: float) -> None:
    if group == "damping":
        spec.joint(joint).damping[0] = value  # MuJoCo 4: a polynomial's coefficients, the linear one first
    else:
        setattr(spec.joint(joint), group, value)


def _set_torque_limit(spec: mujoco.MjSpec, actuator: str, value: float) -> None:
    act = spec.actuator(actuator)
    act.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
    act.forcerange = [-value, value]


def _position_actuator(spec: mujoco.MjSpec, joint: str):
    found = [a for a in spec.actuators if a.target == joint and a.trntype == mujoco.mjtTrn.mjTRN_JOINT]
    position = [a for a in found if sysid.model_modifier.is_position_actuator(a) and a.gainprm[0] > 0]
    if not position:
        raise SysidParameterError(f"{joint}: no position actuator drives it (kp, kd and torque_limit fit one)")
    return position[0]
