# SPDX-License-Identifier: BSD-3-Clause
"""An end-effector pose target: `EndEffectorTargetCommand`'s point plus a tool orientation that faces it."""

from __future__ import annotations

import torch

from batonlab.commands.ee_target import EndEffectorTargetCommand, cartesian_to_spherical
from batonlab.deploy.pose import POSE_FIELDS
from batonlab.env.cfg import CommandTermCfg
from batonlab.utils.quaternions import (quat_angle_between, quat_canonical, quat_from_euler_xyz, quat_mul, quat_slerp,
                                        yaw_to_quat)


class EndEffectorPoseCommand(EndEffectorTargetCommand):
    """Target pose of the end-effector in the arm base frame: (x, y, z) [m] then (qw, qx, qy, qz), w >= 0.

    The position is drawn and glides as in `EndEffectorTargetCommand`. The orientation is the stowed
    tool orientation turned about the vertical to face the drawn point (its yaw around the shoulder),
    then tilted about the tool's own y axis by a draw in `tilt_range` and rolled about its z axis by a
    draw in `roll_range` [rad]; it glides along the shorter arc (slerp) with the position. `metrics`
    add `ee_orient_error` = ∫ angle(ee, target) dt [rad·s] (with `ee_quat_sensor`).

    Params (besides `EndEffectorTargetCommand`'s):
        stowed_quat: tool orientation of the stowed arm in the arm base frame (w, x, y, z).
        tilt_range, roll_range: tool-frame tilt (about y) and roll (about z) draws [rad].
        ee_quat_sensor: `framequat` sensor of the end-effector in the arm base frame, for `metrics`.
    """

    dim = 7
    fields = POSE_FIELDS

    def __init__(self, env, cfg: CommandTermCfg, stowed_quat: tuple[float, float, float, float],
                 tilt_range: tuple[float, float] = (0.0, 0.0), roll_range: tuple[float, float] = (0.0, 0.0),
                 ee_quat_sensor: str | None = None, **target_params):
        quat = torch.tensor(stowed_quat, dtype=torch.float32)
        self.stowed_quat = quat_canonical(quat / torch.linalg.vector_norm(quat)).to(env.device)
        """Tool orientation of the stowed arm (4,) (w, x, y, z), unit, w >= 0."""
        self.tilt_range, self.roll_range = tuple(tilt_range), tuple(roll_range)
        self.ee_quat_sensor = ee_quat_sensor
        super().__init__(env, cfg, **target_params)
        self.metrics["ee_orient_error"] = torch.zeros(env.num_envs, device=env.device)

    def sample(self, n: int) -> torch.Tensor:
        """(n, 7) goals: `EndEffectorTargetCommand`'s points (NaN where none is clear) and orientations facing them."""
        points = super().sample(n)
        yaw = cartesian_to_spherical(points, self.shoulder)["yaw"]
        tilt = self.env.uniform(n, *self.tilt_range)
        roll = self.env.uniform(n, *self.roll_range)
        facing = quat_mul(yaw_to_quat(torch.nan_to_num(yaw)), self.stowed_quat.expand(n, 4))
        quat = quat_mul(facing, quat_from_euler_xyz(torch.zeros_like(tilt), tilt, torch.zeros_like(tilt)))
        quat = quat_mul(quat, quat_from_euler_xyz(torch.zeros_like(roll), torch.zeros_like(roll), roll))
        quat = torch.where(torch.isnan(points[:, :1]), float("nan"), quat_canonical(quat))
        return torch.cat([points, quat], dim=1)

    def default_value(self) -> tuple[float, ...]:
        """The stowed arm's pose."""
        return (*super().default_value(), *(float(v) for v in self.stowed_quat))

    def _glide(self, s: torch.Tensor) -> None:
        self.command[:, :3] = self.start[:, :3] + (self.goal[:, :3] - self.start[:, :3]) * s.unsqueeze(-1)
        self.command[:, 3:] = quat_canonical(quat_slerp(self.start[:, 3:], self.goal[:, 3:], s))

    def _accumulate_errors(self, dt: float) -> None:
        super()._accumulate_errors(dt)
        if self.ee_quat_sensor is not None:
            angle = quat_angle_between(self.env.sim.sensor(self.ee_quat_sensor), self.command[:, 3:])
            self.metrics["ee_orient_error"] += angle * dt
