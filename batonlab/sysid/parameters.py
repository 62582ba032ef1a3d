# SPDX-License-Identifier: BSD-3-Clause
"""Per-joint parameter groups as `mujoco.sysid` parameters whose modifiers edit an MjSpec.

A group names one physical quantity of each listed joint: `armature` [kg·m²], `damping` [N·m·s/rad],
`frictionloss` [N·m] (absolute values), `kp` and `kd` (scales of the position actuator's nominal gains) and
`torque_limit` [N·m] (the actuator's symmetric force range). `mujoco.sysid` rebuilds the same spec at every
evaluation, so each modifier writes an absolute value computed from the nominal read here once.
"""

from __future__ import annotations

import math

import mujoco
from mujoco import sysid

from batonlab.robots.fitted import FIT_GROUPS, FitOverlayError, group_value, set_group_value

if not hasattr(sysid, "optimize"):  # mujoco.sysid hides its missing dependencies behind an empty module
    raise ImportError("mujoco.sysid lacks its dependencies: pip install 'mujoco[sysid]' (batonlab[train] has them)")

GROUPS = FIT_GROUPS
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
    try:
        nominal = group_value(spec, joint, group)
    except FitOverlayError as err:
        raise SysidParameterError(str(err)) from None
    if group in ("armature", "damping", "frictionloss"):
        high = max(10.0 * nominal, {"armature": 0.1, "damping": 5.0, "frictionloss": 2.0}[group])
        return sysid.Parameter(name, nominal, 0.0, high,
                               modifier=lambda s, p: set_group_value(s, joint, group, p.value[0]))
    if group in ("kp", "kd"):
        return sysid.Parameter(name, 1.0, 0.25, 4.0,
                               modifier=lambda s, p: set_group_value(s, joint, group, nominal * p.value[0]))
    if not 0.0 < nominal < math.inf:
        raise SysidParameterError(f"{joint}: its actuator has no force range to fit")
    return sysid.Parameter(name, nominal, 0.2 * nominal, 2.0 * nominal,
                           modifier=lambda s, p: set_group_value(s, joint, group, p.value[0]))


def fitted_value(param: sysid.Parameter, nominal_spec: mujoco.MjSpec) -> float:
    """The absolute value a fitted parameter `<joint>/<group>` stands for (kp and kd are fitted as scales)."""
    joint, group = param.name.rsplit("/", 1)
    value = float(param.value[0])
    return value * group_value(nominal_spec, joint, group) if group in ("kp", "kd") else value
