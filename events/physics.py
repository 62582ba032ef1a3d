# SPDX-License-Identifier: BSD-3-Clause
"""Event terms that randomise physics per world (friction, mass, joint and actuator parameters, delay)."""

from __future__ import annotations

import torch

from batonlab.events.sampling import uniform_or_zero


def randomize_joint_parameters(
    env,
    env_ids: torch.Tensor,
    joints: tuple[str, ...],
    damping_range: tuple[float, float] | None = None,
    friction_range: tuple[float, float] | None = None,
    armature_range: tuple[float, float] | None = None,
) -> None:
    """Scale joint damping, dry friction and armature of each world by U(range) of the nominal value."""
    adr = env.scene.dof_adr(joints)
    fields = {}
    for field, value_range in (("dof_damping", damping_range), ("dof_frictionloss", friction_range), ("dof_armature", armature_range)):
        if value_range is None:
            continue
        values = env.scene.nominal(field).repeat(len(env_ids), 1)
        values[:, adr] *= env.uniform((len(env_ids), len(joints)), *value_range).cpu()
        fields[field] = values
    if fields:
        env.sim.set_params(env_ids, **fields)


def randomize_geom_friction(
    env, env_ids: torch.Tensor, geoms: tuple[str, ...], friction_range: tuple[float, float]
) -> None:
    """Sliding friction of `geoms` drawn from U(friction_range), one value per world [-]."""
    ids = [env.scene.geom_id(g) for g in geoms]
    values = env.scene.nominal("geom_friction").repeat(len(env_ids), 1, 1)
    values[:, ids, 0] = env.uniform((len(env_ids), 1), *friction_range).cpu()
    env.sim.set_params(env_ids, geom_friction=values)


def randomize_body_mass_and_com(
    env,
    env_ids: torch.Tensor,
    body: str,
    added_mass_range: tuple[float, float] = (0.0, 0.0),
    com_offset_range: dict[str, tuple[float, float]] | None = None,
) -> None:
    """Add U(added_mass_range) [kg] to a body and shift its centre of mass by U(range) per axis [m]."""
    bid = env.scene.body_id(body)
    n = len(env_ids)
    mass = env.scene.nominal("body_mass").repeat(n, 1)
    mass[:, bid] += env.uniform(n, *added_mass_range).cpu()
    ipos = env.scene.nominal("body_ipos").repeat(n, 1, 1)
    ipos[:, bid] += torch.stack([uniform_or_zero(env, n, com_offset_range, k) for k in ("x", "y", "z")], dim=-1).cpu()
    env.sim.set_params(env_ids, body_mass=mass, body_ipos=ipos)


def randomize_actuator_gains(
    env,
    env_ids: torch.Tensor,
    joints: tuple[str, ...],
    kp_scale_range: tuple[float, float] = (1.0, 1.0),
    kd_scale_range: tuple[float, float] = (1.0, 1.0),
    strength_range: tuple[float, float] = (1.0, 1.0),
) -> None:
    """Scale the PD gains and the motor strength of the servos driving `joints`, per world.

    For MuJoCo position servos kp = gainprm[0] = -biasprm[1] and kd = -biasprm[2]; velocity servos
    have kp = 0 and their kv in gainprm[0] = -biasprm[2], so `kp_scale` leaves them alone and `kd_scale`
    scales their kv. Motor strength scales the whole output and the torque limit alike.
    """
    scene = env.scene
    act = scene.actuator_for_joints(joints)
    n, k = len(env_ids), len(act)
    gain = scene.nominal("actuator_gainprm").repeat(n, 1, 1)
    bias = scene.nominal("actuator_biasprm").repeat(n, 1, 1)
    force = scene.nominal("actuator_forcerange").repeat(n, 1, 1)
    kp_scale = env.uniform((n, k), *kp_scale_range).cpu()
    kd_scale = env.uniform((n, k), *kd_scale_range).cpu()
    strength = env.uniform((n, k), *strength_range).cpu()
    is_position = scene.nominal("actuator_biasprm")[act, 1] != 0.0
    gain_scale = torch.where(is_position, kp_scale, kd_scale)
    gain[:, act, 0] *= gain_scale * strength
    bias[:, act, 1] *= kp_scale * strength
    bias[:, act, 2] *= kd_scale * strength
    force[:, act] *= strength.unsqueeze(-1)
    env.sim.set_params(env_ids, actuator_gainprm=gain, actuator_biasprm=bias, actuator_forcerange=force)


def randomize_action_delay(env, env_ids: torch.Tensor, delay_range: tuple[int, int] = (0, 2)) -> None:
    """Per-env action latency drawn uniformly from the integers in `delay_range` [control steps]."""
    low, high = int(delay_range[0]), int(delay_range[1])
    steps = torch.randint(low, high + 1, (len(env_ids),), generator=env.generator, device=env.device)
    env.action_manager.set_delay(env_ids, steps)
