# SPDX-License-Identifier: BSD-3-Clause
"""Locomotion terms for free-floating bases: command tracking (exp kernels), posture, and penalties.

Velocity commands follow `batonlab.commands.base_velocity.BaseVelocityCommand`: (forward speed in the
heading frame [m/s], yaw rate [rad/s], base height [m]).
"""

from __future__ import annotations

from batonlab.observations.root_state import base_height, root_ang_vel_b, root_lin_vel_heading, root_lin_vel_w, root_projected_gravity, root_yaw_rate_w
import torch


# Command tracking.


def track_lin_vel_x_exp(env, command: str, std: float, joint: str = "root") -> torch.Tensor:
    """`exp(-(v_x - v_cmd)² / std²)` with v_x the forward speed in the heading frame [m/s]."""
    error = root_lin_vel_heading(env, joint)[:, 0] - env.command_manager.command(command)[:, 0]
    return torch.exp(-error.square() / std**2)


def track_ang_vel_z_exp(env, command: str, std: float, joint: str = "root") -> torch.Tensor:
    """`exp(-(ω_z - ω_cmd)² / std²)` with ω_z the yaw rate about the world z axis [rad/s]."""
    error = root_yaw_rate_w(env, joint) - env.command_manager.command(command)[:, 1]
    return torch.exp(-error.square() / std**2)


def track_base_height_exp(env, command: str, std: float, base_sensor: str, wheel_sensors: tuple[str, ...],
                          wheel_radius: float) -> torch.Tensor:
    """`exp(-(h - h_cmd)² / std²)` with h the base height above the ground under the wheels [m]."""
    height = base_height(env, base_sensor, wheel_sensors, wheel_radius)
    return torch.exp(-(height - env.command_manager.command(command)[:, 2]).square() / std**2)


# Posture and base motion.


def flat_orientation_l2(env, joint: str = "root") -> torch.Tensor:
    """Squared xy components of gravity in the body frame: 0 upright, ~tilt² for small tilts [-]."""
    return root_projected_gravity(env, joint)[:, :2].square().sum(dim=-1)


def lin_vel_z_l2(env, joint: str = "root") -> torch.Tensor:
    """Squared vertical speed of the base [m²/s²]."""
    return root_lin_vel_w(env, joint)[:, 2].square()


def lin_vel_y_l2(env, joint: str = "root") -> torch.Tensor:
    """Squared sideways speed in the heading frame (wheels skidding) [m²/s²]."""
    return root_lin_vel_heading(env, joint)[:, 1].square()


def ang_vel_xy_l2(env, joint: str = "root") -> torch.Tensor:
    """Squared roll and pitch rates of the base, body frame [rad²/s²]."""
    return root_ang_vel_b(env, joint)[:, :2].square().sum(dim=-1)


# Joints and actuators.


def joint_pos_deviation_l2(env, joints: tuple[str, ...]) -> torch.Tensor:
    """Squared distance of `joints` from the default pose, summed [rad²]."""
    adr = env.scene.qpos_adr(joints)
    return (env.sim.qpos[:, adr] - env.default_qpos[adr]).square().sum(dim=-1)


def joint_mirror_l2(env, left: tuple[str, ...], right: tuple[str, ...]) -> torch.Tensor:
    """Squared difference between paired left and right joints (a symmetric stance) [rad²]."""
    return (env.sim.qpos[:, env.scene.qpos_adr(left)] - env.sim.qpos[:, env.scene.qpos_adr(right)]).square().sum(dim=-1)


def actuator_force_l2(env, sensors: tuple[str, ...]) -> torch.Tensor:
    """Squared actuator forces from `actuatorfrc` sensors, summed [N²·m²]."""
    return torch.cat([env.sim.sensor(s) for s in sensors], dim=-1).square().sum(dim=-1)


# Episode events.


def is_alive(env) -> torch.Tensor:
    """1 for every env that did not fail this step."""
    return (~env.termination_manager.terminated).float()


def is_terminated(env) -> torch.Tensor:
    """1 on the step an episode fails (time-outs excluded); use with a negative weight."""
    return env.termination_manager.terminated.float()
