# SPDX-License-Identifier: BSD-3-Clause
"""Generic observation, event and termination terms, written against the backend tensors only.

Reward terms live in `batonlab.rewards`, curricula in `batonlab.curricula`.

Column gathers use `index_select` (and scatters `index_copy_`), never `x[:, index_tensor]`: on the
CPU build of torch 2.13 the advanced-indexing path costs ~10 ms on a (2048, 8) tensor, 1000x more.
"""

from __future__ import annotations

import torch

# Observations.


def joint_pos_rel(env, joints: tuple[str, ...]) -> torch.Tensor:
    """Joint positions minus the default pose, in the given order [rad or m], (num_envs, len(joints))."""
    adr = env.scene.qpos_adr(joints)
    return env.sim.qpos.index_select(1, adr) - env.default_qpos[adr]


def joint_vel(env, joints: tuple[str, ...]) -> torch.Tensor:
    """Joint velocities in the given order [rad/s or m/s], (num_envs, len(joints))."""
    return env.sim.qvel.index_select(1, env.scene.dof_adr(joints))


def last_action(env) -> torch.Tensor:
    """The deployable policy output of the previous step (raw, before scaling), (num_envs, num_actions
    - privileged dims): a robot knows the actions it executed, never the virtual forces of training."""
    manager = env.action_manager
    return manager.action[:, : manager.action_dim - manager.privileged_dim]


def generated_command(env, command: str) -> torch.Tensor:
    """The current value of a command term, (num_envs, dim)."""
    return env.command_manager.command(command)


def sensor(env, name: str) -> torch.Tensor:
    """A named MuJoCo sensor, (num_envs, dim)."""
    return env.sim.sensor(name)


# Events.


def reset_joints_uniform(env, env_ids: torch.Tensor, joints: tuple[str, ...], position_range: tuple[float, float]) -> None:
    """Offset the reset pose of `joints` by U(position_range), clipped to the joint limits of limited joints
    [rad or m] (a continuous joint, whose range MuJoCo leaves at (0, 0), is not clipped)."""
    adr = env.scene.qpos_adr(joints)
    limits = env.scene.joint_limits(joints, env.device)
    offsets = env.uniform((len(env_ids), len(joints)), *position_range)
    rows = env.reset_qpos[env_ids]
    rows[:, adr] = (rows[:, adr] + offsets).clamp(limits[:, 0], limits[:, 1])
    env.reset_qpos[env_ids] = rows


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


def push_by_setting_velocity(env, env_ids: torch.Tensor, velocity_range: dict[str, tuple[float, float]], joint: str) -> None:
    """Add a random velocity to a free joint (a push) [m/s, rad/s]; keys among x, y, z, roll, pitch, yaw."""
    dof = int(env.scene.model.jnt_dofadr[env.scene.joint_ids([joint])[0]])
    qpos, qvel = env.sim.qpos[env_ids].clone(), env.sim.qvel[env_ids].clone()
    for k, axis in enumerate(("x", "y", "z", "roll", "pitch", "yaw")):
        if axis in velocity_range:
            qvel[:, dof + k] += env.uniform(len(env_ids), *velocity_range[axis])
    env.sim.reset(env_ids, qpos, qvel)


def sensor_pose(env, name: str, position: str, orientation: str) -> torch.Tensor:
    """A pose from two MuJoCo sensors, (num_envs, 7): position [m] then quaternion (w, x, y, z), w >= 0.

    `name` is what the robot calls the pose (its topic `sensors/<name>`, e.g. a perception node's
    `object_pose`); `position` / `orientation` are the `framepos` / `framequat` sensors that give it
    in simulation, in the same reference frame.
    """
    quat = env.sim.sensor(orientation)
    # q and -q are one orientation: the robot side reports w >= 0, so training does too.
    quat = torch.where(quat[:, :1] < 0, -quat, quat)
    return torch.cat([env.sim.sensor(position), quat], dim=1)


def privilege_level(env) -> torch.Tensor:
    """The privilege level λ, (num_envs, 1): a privileged observation (a critic's value depends on the help)."""
    return torch.full((env.num_envs, 1), env.privilege_manager.level, device=env.device)
