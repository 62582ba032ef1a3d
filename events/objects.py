# SPDX-License-Identifier: BSD-3-Clause
"""Event term that places a free object and randomises its physics per episode."""

from __future__ import annotations

import torch

from batonlab.env.terms import ManagerTerm
from batonlab.utils.quaternions import yaw_to_quat


class RandomizeObject(ManagerTerm):
    """Reset event: place a free box on the table and draw its size, mass and friction per env.

    Sizes only shrink (`size_scale` ≤ 1): MuJoCo's broad phase keeps the nominal bounding volume.
    Mass scales the inertia with it. Parameters are written per world (`SimBackend.set_params`),
    and kept in `physics` for privileged observations.

    Args:
        body: The object's body (a free joint of the same name, one box geom of the same name).
        x_range, y_range: Where its centre is placed [m, world frame].
        yaw_range: Its heading [rad].
        size_scale: Range of the factor on the nominal half sizes.
        mass_range: Its mass [kg].
        friction_range: Its sliding friction coefficient.
    """

    def __init__(self, env, body: str, x_range: tuple[float, float], y_range: tuple[float, float],
                 yaw_range: tuple[float, float] = (0.0, 0.0), size_scale: tuple[float, float] = (1.0, 1.0),
                 mass_range: tuple[float, float] | None = None, friction_range: tuple[float, float] | None = None):
        if size_scale[1] > 1.0:
            raise ValueError("RandomizeObject: size_scale must not exceed 1 (the broad phase keeps the nominal bounds)")
        model = env.scene.model
        self.env, self.body = env, body
        self.body_id = env.scene.body_id(body)
        self.geom_id = int(model.body_geomadr[self.body_id])
        self.nominal_half = torch.as_tensor(model.geom_size[self.geom_id], dtype=torch.float32)
        self.nominal_mass = float(model.body_mass[self.body_id])
        self.nominal_inertia = torch.as_tensor(model.body_inertia[self.body_id], dtype=torch.float32)
        self.nominal_friction = float(model.geom_friction[self.geom_id, 0])
        self.ranges = dict(x=x_range, y=y_range, yaw=yaw_range, size=size_scale, mass=mass_range, friction=friction_range)
        self.physics = torch.tensor([self.nominal_mass, self.nominal_friction, 1.0], device=env.device).repeat(env.num_envs, 1)
        """(num_envs, 3): mass [kg], friction, size scale of each env's object."""
        self.half_height = torch.full((env.num_envs,), float(self.nominal_half[2]), device=env.device)
        """(num_envs,) half height of each env's object [m] (its resting centre height above the table)."""

    def __call__(self, env, env_ids: torch.Tensor) -> None:
        n = len(env_ids)
        r = self.ranges
        scale = env.uniform(n, *r["size"])
        mass = env.uniform(n, *r["mass"]) if r["mass"] is not None else torch.full((n,), self.nominal_mass, device=env.device)
        friction = (env.uniform(n, *r["friction"]) if r["friction"] is not None
                    else torch.full((n,), self.nominal_friction, device=env.device))
        self._write_params(env_ids, scale, mass, friction)
        self.physics[env_ids] = torch.stack([mass, friction, scale], dim=1)
        self.half_height[env_ids] = scale * float(self.nominal_half[2])
        qadr, _ = env.scene.free_body_adr(self.body)
        yaw = env.uniform(n, *r["yaw"])
        rows = env.reset_qpos[env_ids]
        rows[:, qadr] = env.uniform(n, *r["x"])
        rows[:, qadr + 1] = env.uniform(n, *r["y"])
        rows[:, qadr + 2] = self.half_height[env_ids] + 0.001
        rows[:, qadr + 3 : qadr + 7] = yaw_to_quat(yaw)
        env.reset_qpos[env_ids] = rows

    def _write_params(self, env_ids: torch.Tensor, scale: torch.Tensor, mass: torch.Tensor, friction: torch.Tensor) -> None:
        r = self.ranges
        if r["size"] == (1.0, 1.0) and r["mass"] is None and r["friction"] is None:
            return
        sim = self.env.sim
        ids = env_ids.to(sim.device)
        fields = {}
        if r["size"] != (1.0, 1.0):
            sizes = sim.get_params("geom_size")[ids].clone()
            sizes[:, self.geom_id] = (scale.cpu()[:, None] * self.nominal_half).to(sizes)
            fields["geom_size"] = sizes
        if r["mass"] is not None or r["size"] != (1.0, 1.0):
            masses = sim.get_params("body_mass")[ids].clone()
            masses[:, self.body_id] = mass.to(masses)
            inertia = sim.get_params("body_inertia")[ids].clone()
            # A uniform box: inertia ∝ mass · size².
            factor = (mass / self.nominal_mass) * scale.square()
            inertia[:, self.body_id] = (factor.cpu()[:, None] * self.nominal_inertia).to(inertia)
            fields.update(body_mass=masses, body_inertia=inertia)
        if r["friction"] is not None:
            frictions = sim.get_params("geom_friction")[ids].clone()
            frictions[:, self.geom_id, 0] = friction.to(frictions)
            fields["geom_friction"] = frictions
        sim.set_params(ids, **fields)
