# SPDX-License-Identifier: BSD-3-Clause
"""Generic terms for mobile bases with a free-floating root: root state, commands, events, terminations.

Conventions (MuJoCo's free joint): qpos = (pos_w [m], quat_wxyz), qvel = (lin_vel_w [m/s],
ang_vel_b [rad/s]) — linear velocity in the world frame, angular velocity in the body frame.
The *heading frame* is the world frame turned by the base's yaw: its x axis is "forward" on the
ground plane, whatever the base's pitch. Reward terms live in `batonlab.rewards.locomotion`.
"""

from __future__ import annotations

import math
import weakref

import mujoco
import torch

from batonlab.env.cfg import CommandTermCfg
from batonlab.env.commands import CommandTerm

# Quaternions (wxyz, batch first).


def quat_rotate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors v (N, 3) by unit quaternions q (N, 4)."""
    w, u = q[:, :1], q[:, 1:]
    t = 2.0 * torch.cross(u, v, dim=-1)
    return v + w * t + torch.cross(u, t, dim=-1)


def quat_rotate_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors v (N, 3) by the inverse of unit quaternions q (N, 4): world → body."""
    w, u = q[:, :1], q[:, 1:]
    t = 2.0 * torch.cross(u, v, dim=-1)
    return v - w * t + torch.cross(u, t, dim=-1)


def quat_from_euler_xyz(roll: torch.Tensor, pitch: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    """Quaternions (N, 4) of intrinsic z-y-x rotations (yaw, then pitch, then roll) [rad]."""
    cr, sr = torch.cos(roll / 2), torch.sin(roll / 2)
    cp, sp = torch.cos(pitch / 2), torch.sin(pitch / 2)
    cy, sy = torch.cos(yaw / 2), torch.sin(yaw / 2)
    return torch.stack(
        (cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy),
        dim=-1,
    )


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product a ⊗ b of quaternions (N, 4) wxyz."""
    # Component c is sum_k sign[k, c] * a_k * b_(index[k, c]), summed in order k = 0..3: the textbook
    # formula (w = aw bw - ax bx - ay by - az bz, ...) term for term, in six tensor ops instead of thirty.
    terms = a.unsqueeze(-1) * b[:, _QUAT_MUL_INDEX] * _QUAT_MUL_SIGN.to(device=a.device, dtype=a.dtype)
    return terms[:, 0] + terms[:, 1] + terms[:, 2] + terms[:, 3]


_QUAT_MUL_INDEX = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]])
"""index[k, c]: the component of b that a_k multiplies in component c of a ⊗ b."""
_QUAT_MUL_SIGN = torch.tensor([[1.0, 1.0, 1.0, 1.0], [-1.0, 1.0, -1.0, 1.0], [-1.0, 1.0, 1.0, -1.0],
                               [-1.0, -1.0, 1.0, 1.0]])
"""sign[k, c] of the term a_k b_(index[k, c]) in component c."""


def yaw_from_quat(q: torch.Tensor) -> torch.Tensor:
    """Heading angle (N,) of quaternions (N, 4) [rad]."""
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


# Root state, read from the free joint.

_FREE_JOINT_ADR: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""Per scene: joint name -> (qpos address, dof address), looked up once (terms call this every step)."""


def _free_joint_adr(env, joint: str) -> tuple[int, int]:
    cache = _FREE_JOINT_ADR.setdefault(env.scene, {})
    if joint not in cache:
        model = env.scene.model
        jid = env.scene.joint_ids([joint])[0]
        if int(model.jnt_type[jid]) != int(mujoco.mjtJoint.mjJNT_FREE):
            raise ValueError(f"joint '{joint}' is not a free joint")
        cache[joint] = (int(model.jnt_qposadr[jid]), int(model.jnt_dofadr[jid]))
    return cache[joint]


def root_pos_w(env, joint: str = "root") -> torch.Tensor:
    """Root position in the world (N, 3) [m]."""
    q = _free_joint_adr(env, joint)[0]
    return env.sim.qpos[:, q : q + 3]


def root_quat_w(env, joint: str = "root") -> torch.Tensor:
    """Root orientation (N, 4) wxyz."""
    q = _free_joint_adr(env, joint)[0]
    return env.sim.qpos[:, q + 3 : q + 7]


def root_lin_vel_w(env, joint: str = "root") -> torch.Tensor:
    """Root linear velocity in the world frame (N, 3) [m/s]."""
    d = _free_joint_adr(env, joint)[1]
    return env.sim.qvel[:, d : d + 3]


def root_ang_vel_b(env, joint: str = "root") -> torch.Tensor:
    """Root angular velocity in the body frame (N, 3) [rad/s]."""
    d = _free_joint_adr(env, joint)[1]
    return env.sim.qvel[:, d + 3 : d + 6]


def root_lin_vel_b(env, joint: str = "root") -> torch.Tensor:
    """Root linear velocity in the body frame (N, 3) [m/s] (privileged: a robot estimates it)."""
    return quat_rotate_inverse(root_quat_w(env, joint), root_lin_vel_w(env, joint))


def root_lin_vel_heading(env, joint: str = "root") -> torch.Tensor:
    """Root linear velocity in the heading frame (N, 3) [m/s]: x forward on the ground, z up."""
    yaw = yaw_from_quat(root_quat_w(env, joint))
    v = root_lin_vel_w(env, joint)
    c, s = torch.cos(yaw), torch.sin(yaw)
    return torch.stack((c * v[:, 0] + s * v[:, 1], -s * v[:, 0] + c * v[:, 1], v[:, 2]), dim=-1)


def root_yaw_rate_w(env, joint: str = "root") -> torch.Tensor:
    """Turning rate about the world z axis (N,) [rad/s]."""
    return quat_rotate(root_quat_w(env, joint), root_ang_vel_b(env, joint))[:, 2]


def root_projected_gravity(env, joint: str = "root") -> torch.Tensor:
    """Unit gravity direction in the body frame (N, 3); (0, 0, -1) when upright."""
    q = root_quat_w(env, joint)
    down = torch.zeros(q.shape[0], 3, device=q.device)
    down[:, 2] = -1.0
    return quat_rotate_inverse(q, down)


# Observations.


def projected_gravity(env, sensor: str = "imu_quat") -> torch.Tensor:
    """Gravity direction in the IMU frame (N, 3) from a `framequat` sensor, as a robot's IMU gives it."""
    q = env.sim.sensor(sensor)
    down = torch.zeros(q.shape[0], 3, device=q.device)
    down[:, 2] = -1.0
    return quat_rotate_inverse(q, down)


def base_height(env, base_sensor: str, wheel_sensors: tuple[str, ...], wheel_radius: float) -> torch.Tensor:
    """Height of the base above the ground under its wheels (N,) [m], from world `framepos` sensors.

    Measured from the wheel centres rather than from z = 0, so it means the same on any terrain.
    """
    wheel_z = torch.stack([env.sim.sensor(s)[:, 2] for s in wheel_sensors], dim=-1).mean(dim=-1)
    return env.sim.sensor(base_sensor)[:, 2] - wheel_z + wheel_radius


# Commands.


class BaseVelocityCommand(CommandTerm):
    """Forward speed, yaw rate and base height for a wheeled or legged base, uniform in `ranges`.

    command[:, 0]: forward velocity in the heading frame [m/s]; command[:, 1]: yaw rate [rad/s];
    command[:, 2]: base height [m]. A `standing_fraction` of the resampled envs get zero velocity.
    Its default (a robot without an operator) is standing still at `default_height` (None: the
    middle of `height_range`).

    `ranges` is the live sampling range (curricula widen it). `metrics` accumulate over the episode
    (reset with the command): `distance_commanded` = ∫|v_cmd| dt, `distance_traveled` = ∫ v·sign(v_cmd) dt
    along the heading [m], `lin_vel_error` = ∫|v − v_cmd| dt [m], `time` [s].
    """

    dim = 3
    fields = ("lin_vel_x", "ang_vel_z", "height")

    def __init__(
        self,
        env,
        cfg: CommandTermCfg,
        lin_vel_x_range: tuple[float, float],
        ang_vel_z_range: tuple[float, float],
        height_range: tuple[float, float],
        standing_fraction: float = 0.0,
        default_height: float | None = None,
        joint: str = "root",
    ):
        super().__init__(env, cfg)
        self.joint = joint
        self.default_height = float(default_height if default_height is not None else sum(height_range) / 2)
        self.standing_fraction = standing_fraction
        self.ranges = {
            "lin_vel_x": tuple(lin_vel_x_range),
            "ang_vel_z": tuple(ang_vel_z_range),
            "height": tuple(height_range),
        }
        metrics = ("distance_commanded", "distance_traveled", "lin_vel_error", "time")
        self.metrics = {k: torch.zeros(env.num_envs, device=env.device) for k in metrics}

    def sample(self, n: int) -> torch.Tensor:
        cmd = torch.stack([self.env.uniform(n, *self.ranges[k]) for k in ("lin_vel_x", "ang_vel_z", "height")], dim=-1)
        standing = self.env.uniform(n, 0.0, 1.0) < self.standing_fraction
        cmd[standing, :2] = 0.0
        return cmd

    def default_value(self) -> tuple[float, ...]:
        return (0.0, 0.0, self.default_height)

    def update(self, dt: float) -> None:
        vx = root_lin_vel_heading(self.env, self.joint)[:, 0]
        cmd_vx = self.command[:, 0]
        self.metrics["distance_commanded"] += cmd_vx.abs() * dt
        self.metrics["distance_traveled"] += vx * torch.sign(cmd_vx) * dt
        self.metrics["lin_vel_error"] += (vx - cmd_vx).abs() * dt
        self.metrics["time"] += dt
        super().update(dt)

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        for value in self.metrics.values():
            value[env_ids] = 0.0
        return super().reset(env_ids)


# Events. Model fields are written per world with `env.sim.set_params`, as whole arrays computed from the
# nominal model: one event per field (two events on `actuator_gainprm` would undo each other).


def reset_root_on_terrain(
    env,
    env_ids: torch.Tensor,
    position_range: dict[str, tuple[float, float]] | None = None,
    orientation_range: dict[str, tuple[float, float]] | None = None,
    velocity_range: dict[str, tuple[float, float]] | None = None,
    joint: str = "root",
) -> None:
    """Place the root on the env's terrain tile: default pose + origin + uniform offsets.

    Args:
        position_range: offsets [m], keys among x, y, z (z: drop height above the default).
        orientation_range: roll, pitch, yaw [rad], applied on top of the default orientation.
        velocity_range: x, y, z (world frame) [m/s] and roll, pitch, yaw (body frame) [rad/s].
    """
    q, d = _free_joint_adr(env, joint)
    n = len(env_ids)
    rows = env.reset_qpos[env_ids]
    offset = torch.stack([_sample(env, n, position_range, k) for k in ("x", "y", "z")], dim=-1)
    rows[:, q : q + 3] = env.default_qpos[q : q + 3] + env.terrain.env_origins[env_ids] + offset
    delta = quat_from_euler_xyz(*(_sample(env, n, orientation_range, k) for k in ("roll", "pitch", "yaw")))
    rows[:, q + 3 : q + 7] = quat_mul(delta, env.default_qpos[q + 3 : q + 7].expand(n, 4))
    env.reset_qpos[env_ids] = rows
    vel = env.reset_qvel[env_ids]
    axes = ("x", "y", "z", "roll", "pitch", "yaw")
    vel[:, d : d + 6] = torch.stack([_sample(env, n, velocity_range, k) for k in axes], dim=-1)
    env.reset_qvel[env_ids] = vel


def randomize_geom_friction(
    env, env_ids: torch.Tensor, geoms: tuple[str, ...], friction_range: tuple[float, float]
) -> None:
    """Sliding friction of `geoms` drawn from U(friction_range), one value per world [-]."""
    ids = [_named_id(env, "geom", g) for g in geoms]
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
    bid = _named_id(env, "body", body)
    n = len(env_ids)
    mass = env.scene.nominal("body_mass").repeat(n, 1)
    mass[:, bid] += env.uniform(n, *added_mass_range).cpu()
    ipos = env.scene.nominal("body_ipos").repeat(n, 1, 1)
    ipos[:, bid] += torch.stack([_sample(env, n, com_offset_range, k) for k in ("x", "y", "z")], dim=-1).cpu()
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


def hold_default_pose(env, env_ids: torch.Tensor, joints: tuple[str, ...]) -> None:
    """Set the servo targets of `joints` (not driven by the policy, e.g. a stowed arm) to the default pose."""
    act = env.scene.actuator_for_joints(joints)
    ctrl = env.sim.ctrl
    ctrl[env_ids.to(ctrl.device)[:, None], act] = env.default_qpos[env.scene.qpos_adr(joints)].to(ctrl.device)


def randomize_action_delay(env, env_ids: torch.Tensor, delay_range: tuple[int, int] = (0, 2)) -> None:
    """Per-env action latency drawn uniformly from the integers in `delay_range` [control steps]."""
    low, high = int(delay_range[0]), int(delay_range[1])
    steps = torch.randint(low, high + 1, (len(env_ids),), generator=env.generator, device=env.device)
    env.action_manager.set_delay(env_ids, steps)


# Terminations and success.


def illegal_contact(env, sensors: tuple[str, ...], force_threshold: float = 1.0) -> torch.Tensor:
    """True where any contact sensor (data "found force", net force) reports more than `force_threshold` [N]."""
    forces = torch.stack([torch.linalg.vector_norm(env.sim.sensor(s)[:, 1:4], dim=-1) for s in sensors], dim=-1)
    return (forces > force_threshold).any(dim=-1)


def bad_orientation(env, limit_angle: float, joint: str = "root") -> torch.Tensor:
    """True where the base is tilted more than `limit_angle` from upright [rad]."""
    return root_projected_gravity(env, joint)[:, 2] > -math.cos(limit_angle)


def out_of_terrain_bounds(env, margin: float = 1.0, joint: str = "root") -> torch.Tensor:
    """True where the base is within `margin` of the edge of the terrain grid [m] (use as a time-out)."""
    terrain = env.terrain.terrain
    if terrain is None or terrain.heights is None:
        return torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
    half_x, half_y = (s / 2 - margin for s in terrain.size_xy)
    pos = root_pos_w(env, joint)
    return (pos[:, 0].abs() > half_x) | (pos[:, 1].abs() > half_y)


def survived(env) -> torch.Tensor:
    """Success term: the episode reached its time limit without a failure."""
    return (env.episode_length_buf >= env.max_episode_length) & ~env.termination_manager.terminated


def command_tracked(env, command: str, max_mean_error: float) -> torch.Tensor:
    """Success term: survived, with a mean |v - v_cmd| over the episode below `max_mean_error` [m/s].

    Reads the `metrics` of a `BaseVelocityCommand`.
    """
    metrics = env.command_manager.terms[command].metrics
    mean_error = metrics["lin_vel_error"] / metrics["time"].clamp(min=1e-6)
    return survived(env) & (mean_error < max_mean_error)


# Private helpers.


def _sample(env, n: int, ranges: dict[str, tuple[float, float]] | None, key: str) -> torch.Tensor:
    if not ranges or key not in ranges:
        return torch.zeros(n, device=env.device)
    return env.uniform(n, *ranges[key])


def _named_id(env, kind: str, name: str) -> int:
    obj = {"geom": mujoco.mjtObj.mjOBJ_GEOM, "body": mujoco.mjtObj.mjOBJ_BODY}[kind]
    idx = mujoco.mj_name2id(env.scene.model, obj, name)
    if idx < 0:
        raise KeyError(f"unknown {kind} '{name}'")
    return idx
