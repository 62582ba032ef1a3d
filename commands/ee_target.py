# SPDX-License-Identifier: BSD-3-Clause
"""An end-effector target for an arm on a moving base: drawn in spherical coordinates around the
shoulder, kept clear of the robot's body and of the ground, and moved toward each new draw over
about a second.

Why spherical: the reachable set of an arm is a shell around its shoulder, and "how far, how high,
which side" are the three things a curriculum wants to widen separately (radius, pitch, yaw spans).
Why moved: a target that jumps makes the policy snap the arm, and the reaction torque of a snapping
arm is what topples a balancing base; a target that glides is also what an operator or a tracker
sends on the robot.
"""

from __future__ import annotations

import torch

from batonlab.env.cfg import CommandTermCfg
from batonlab.commands.position import PositionCommand
from batonlab.observations.root_state import root_pos_w, root_quat_w
from batonlab.utils.quaternions import quat_rotate

NUM_CANDIDATES = 8
"""Draws per resample; the first one clear of the keep-out box and the ground is used."""


def spherical_to_cartesian(radius: torch.Tensor, pitch: torch.Tensor, yaw: torch.Tensor,
                           center: torch.Tensor) -> torch.Tensor:
    """Points at `radius` from `center`, `pitch` above the horizontal plane, `yaw` about z [m, rad] → (..., 3) [m]."""
    horizontal = radius * torch.cos(pitch)
    offset = torch.stack([horizontal * torch.cos(yaw), horizontal * torch.sin(yaw), radius * torch.sin(pitch)], dim=-1)
    return center + offset


def cartesian_to_spherical(point: torch.Tensor, center: torch.Tensor) -> dict[str, torch.Tensor]:
    """The inverse of `spherical_to_cartesian`: {"radius", "pitch", "yaw"} of points (..., 3)."""
    offset = point - center
    radius = torch.linalg.vector_norm(offset, dim=-1)
    pitch = torch.atan2(offset[..., 2], torch.linalg.vector_norm(offset[..., :2], dim=-1))
    yaw = torch.atan2(offset[..., 1], offset[..., 0])
    return {"radius": radius, "pitch": pitch, "yaw": yaw}


def clear_of_robot(points: torch.Tensor, keep_out_box: torch.Tensor, min_z: float) -> torch.Tensor:
    """True for points (..., 3) outside the axis-aligned `keep_out_box` (3, 2) and above `min_z` [m]."""
    inside = ((points >= keep_out_box[:, 0]) & (points <= keep_out_box[:, 1])).all(dim=-1)
    return ~inside & (points[..., 2] > min_z)


class EndEffectorTargetCommand(PositionCommand):
    """Target of the end-effector in the arm's base frame (x, y, z) [m], as the policy and the robot see it.

    Each resample draws a goal uniformly in the live `ranges` of spherical coordinates around
    `shoulder` (radius [m], pitch [rad] above horizontal, yaw [rad]); draws inside `keep_out_box`
    (the torso, legs and wheels, with a margin) or below `min_z` (the ground at the nominal stance)
    are redrawn, up to `NUM_CANDIDATES` times, after which the goal stays where the target is. The
    command then moves from where it was to the goal along a smoothstep over `transition_s`. An
    episode starts at `stowed_position`, where the arm is.

    `ranges` is the live sampling range (the arm-workspace curriculum moves it); `stowed` gives the
    spherical coordinates of `stowed_position`. `metrics` accumulate over the episode: `ee_error` =
    ∫‖ee − target‖ dt [m·s] (with `ee_sensor`), `time` [s].

    Params:
        radius_range, pitch_range, yaw_range: initial sampling ranges [m, rad, rad].
        shoulder: centre of the spherical coordinates in the arm base frame [m].
        stowed_position: end-effector position of the stowed arm in the arm base frame [m].
        keep_out_box: ((x_lo, x_hi), (y_lo, y_hi), (z_lo, z_hi)) in the arm base frame [m].
        min_z: lowest target height in the arm base frame [m].
        transition_s: time to glide to a new goal [s].
        ee_sensor: position sensor of the end-effector in the same frame, for `metrics`.
        marker_mocap: optional mocap body moved to the target in the world (videos only).
        root_joint: free joint of the base carrying the arm, to place the marker.
        mount_offset: position of the arm base frame in the base (root body) frame, to place the marker [m].
    """

    def __init__(
        self,
        env,
        cfg: CommandTermCfg,
        radius_range: tuple[float, float],
        pitch_range: tuple[float, float],
        yaw_range: tuple[float, float],
        shoulder: tuple[float, float, float],
        stowed_position: tuple[float, float, float],
        keep_out_box: tuple[tuple[float, float], ...],
        min_z: float,
        transition_s: float = 1.0,
        ee_sensor: str | None = None,
        marker_mocap: str | None = None,
        root_joint: str = "root",
        mount_offset: tuple[float, float, float] = (0.0, 0.0, 0.0),
    ):
        super().__init__(env, cfg)
        if transition_s <= 0:
            raise ValueError(f"transition_s must be > 0, got {transition_s}")
        device = env.device
        self.ranges = {"radius": tuple(radius_range), "pitch": tuple(pitch_range), "yaw": tuple(yaw_range)}
        self.shoulder = torch.tensor(shoulder, dtype=torch.float32, device=device)
        self.stowed_position = torch.tensor(stowed_position, dtype=torch.float32, device=device)
        self.stowed = {k: float(v) for k, v in cartesian_to_spherical(self.stowed_position, self.shoulder).items()}
        """Spherical coordinates of the stowed end-effector {"radius", "pitch", "yaw"} [m, rad, rad]."""
        self.keep_out_box = torch.tensor(keep_out_box, dtype=torch.float32, device=device)
        if self.keep_out_box.shape != (3, 2):
            raise ValueError(f"keep_out_box must be ((x_lo, x_hi), (y_lo, y_hi), (z_lo, z_hi)), got {keep_out_box}")
        self.min_z = float(min_z)
        self.transition_s = float(transition_s)
        self.ee_sensor = ee_sensor
        self.root_joint = root_joint
        self.mount_offset = torch.tensor(mount_offset, dtype=torch.float32, device=device)
        self.stowed_command = torch.tensor(self.default_value(), device=device)
        """The command of a stowed arm (dim,): where every episode's target starts."""
        self.command[:] = self.stowed_command
        self.start = self.command.clone()
        """Where the target was when the current goal was drawn, (num_envs, dim)."""
        self.goal = self.start.clone()
        """The last draw, which the target glides to, (num_envs, dim)."""
        self.phase = torch.ones(env.num_envs, device=device)
        """Progress of the glide from `start` to `goal`, in [0, 1]."""
        self.metrics = {k: torch.zeros(env.num_envs, device=device) for k in ("ee_error", "time")}
        self.mocap_id = self.marker_id(marker_mocap)

    def sample(self, n: int) -> torch.Tensor:
        """Goals for n envs: the first of `NUM_CANDIDATES` draws clear of the robot; NaN where none is."""
        draws = {k: self.env.uniform((n, NUM_CANDIDATES), lo, hi) for k, (lo, hi) in self.ranges.items()}
        points = spherical_to_cartesian(draws["radius"], draws["pitch"], draws["yaw"], self.shoulder)
        clear = clear_of_robot(points, self.keep_out_box, self.min_z)
        first = clear.float().argmax(dim=1)
        goal = points[torch.arange(n, device=points.device), first]
        goal[~clear.any(dim=1)] = float("nan")
        return goal

    def _resample(self, env_ids: torch.Tensor) -> None:
        here = self.command[env_ids].clone()
        super()._resample(env_ids)  # timers, draws and fixed fields written into `command`
        goal = self.command[env_ids]
        goal = torch.where(torch.isnan(goal), here, goal)  # no clear draw: stay
        self.start[env_ids] = here
        self.goal[env_ids] = goal
        self.phase[env_ids] = 0.0
        self.command[env_ids] = here

    def update(self, dt: float) -> None:
        """Glide the target from `start` to `goal` (smoothstep over `transition_s`), accumulate metrics, resample."""
        self.phase = (self.phase + dt / self.transition_s).clamp(max=1.0)
        s = self.phase * self.phase * (3.0 - 2.0 * self.phase)
        self._glide(s)
        self._accumulate_errors(dt)
        self.metrics["time"] += dt
        super().update(dt)
        self._move_marker()

    def _glide(self, s: torch.Tensor) -> None:
        """The command at glide fraction `s` (num_envs,) from `start` to `goal`."""
        self.command[:] = self.start + (self.goal - self.start) * s.unsqueeze(-1)

    def _accumulate_errors(self, dt: float) -> None:
        if self.ee_sensor is not None:
            error = torch.linalg.vector_norm(self.env.sim.sensor(self.ee_sensor) - self.command[:, :3], dim=-1)
            self.metrics["ee_error"] += error * dt

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        """Start the resetting envs' target at the stowed position, zero their metrics, draw their first goal."""
        # A new episode starts with the arm stowed: the target starts there and glides to the first draw.
        self.command[env_ids] = self.stowed_command
        for index, value in self._fixed.items():
            self.command[env_ids, index] = value
        for value in self.metrics.values():
            value[env_ids] = 0.0
        log = super().reset(env_ids)
        self._move_marker()
        return log

    def hold(self, value: torch.Tensor, env_ids: torch.Tensor | None = None) -> None:
        """Set the target of `env_ids` (default: every env) to `value` (len(env_ids), dim) at once, no glide, and keep
        it until the next call."""
        super().hold(value, env_ids)
        ids = slice(None) if env_ids is None else env_ids
        self.start[ids] = self.command[ids]
        self.goal[ids] = self.command[ids]
        self.phase[ids] = 1.0
        self._move_marker()

    def default_value(self) -> tuple[float, ...]:
        """A robot without an operator keeps its arm stowed."""
        return tuple(float(v) for v in self.stowed_position)

    def _move_marker(self) -> None:
        if self.mocap_id is None:
            return
        target_b = self.mount_offset + self.command[:, :3]
        world = root_pos_w(self.env, self.root_joint) + quat_rotate(root_quat_w(self.env, self.root_joint), target_b)
        self.env.sim.mocap_pos[:, self.mocap_id] = world.to(self.env.sim.mocap_pos.device)

