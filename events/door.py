# SPDX-License-Identifier: BSD-3-Clause
"""Event term that randomises a door's pose, size and physics per episode."""

from __future__ import annotations

import mujoco
import torch

from batonlab.env.terms import ManagerTerm
from batonlab.robots import door as door_asset
from batonlab.utils.quaternions import quat_mul, yaw_to_quat


class RandomizeDoor(ManagerTerm):
    """Reset event: move a door and draw its width, panel mass, spring, damping and friction per env.

    The door is closed at every reset (its joints start at the default pose, 0). Its pose moves on its
    mount (the root body's `body_pos` / `body_quat`, offsets from where the scene put it; the mount
    must be `door_asset.add_door_mount`); a narrower panel moves the latch side toward the hinge
    (`door_asset.WIDTH_*`). Widths only shrink: MuJoCo's broad phase keeps the nominal bounds. Values
    are written per world (`SimBackend.set_params`) and kept in `physics` for privileged observations.

    Args:
        x_range, y_range: Offset of the door's origin [m, in the mount's frame].
        yaw_range: Turn of the door about the mount's z axis through its origin [rad].
        width_scale: Range of the factor on the panel's width (≤ 1).
        mass_range: Panel mass [kg] (its inertia follows the box); None keeps the asset's.
        stiffness_scale: Factor on the closing spring's stiffness.
        damping_scale: Factor on the hinge damping.
        friction_scale: Factor on the hinge's dry friction (friction loss).
        handle_friction_range: Sliding friction of the handle's geoms (they decide a grasp's friction); None keeps the asset's.
        handle_stiffness_scale: Factor on the handle's return spring.
    """

    PHYSICS_COLUMNS = ("x_offset", "y_offset", "yaw_offset", "width_scale", "panel_mass", "hinge_stiffness",
                       "hinge_damping", "hinge_frictionloss", "handle_friction", "handle_stiffness")
    """Columns of `physics` [m, m, rad, -, kg, N·m/rad, N·m·s/rad, N·m, -, N·m/rad]."""

    def __init__(self, env, x_range=(0.0, 0.0), y_range=(0.0, 0.0), yaw_range=(0.0, 0.0), width_scale=(1.0, 1.0),
                 mass_range: tuple[float, float] | None = None, stiffness_scale=(1.0, 1.0), damping_scale=(1.0, 1.0),
                 friction_scale=(1.0, 1.0), handle_friction_range: tuple[float, float] | None = None,
                 handle_stiffness_scale=(1.0, 1.0)):
        if width_scale[1] > 1.0:
            raise ValueError("RandomizeDoor: width_scale must not exceed 1 (the broad phase keeps the nominal bounds)")
        model, scene = env.scene.model, env.scene
        self.env = env
        self.body = scene.body_id(door_asset.DOOR_BODY)
        self.panel = scene.body_id(door_asset.PANEL_BODY)
        self.hinge, self.handle = scene.joint_ids((door_asset.HINGE_JOINT, door_asset.HANDLE_JOINT))
        self.hinge_dof = int(model.jnt_dofadr[self.hinge])
        self.panel_geom = _ids(model, mujoco.mjtObj.mjOBJ_GEOM, (door_asset.PANEL_GEOM,))[0]
        self.handle_geoms = _ids(model, mujoco.mjtObj.mjOBJ_GEOM, door_asset.HANDLE_GEOMS)
        # The latch side's parts that exist (a door without latch has no bolt or strike).
        self.shifted_bodies = _ids(model, mujoco.mjtObj.mjOBJ_BODY, door_asset.WIDTH_SHIFTED_BODIES, present_only=True)
        self.shifted_geoms = _ids(model, mujoco.mjtObj.mjOBJ_GEOM, door_asset.WIDTH_SHIFTED_GEOMS, present_only=True)
        self.spanning_geoms = _ids(model, mujoco.mjtObj.mjOBJ_GEOM, door_asset.WIDTH_SPANNING_GEOMS)
        self.width = 2.0 * float(model.geom_size[self.panel_geom, 1])
        root = int(model.body_rootid[self.body])
        if int(model.body_weldid[self.body]) == 0 and int(model.body_mocapid[root]) < 0:
            raise ValueError("RandomizeDoor: the door is welded to the world, where mujoco_warp never moves its geoms; "
                             "mount it with batonlab.robots.door.add_door_mount")
        self.model = model
        """The template model: nominal values of every field written (never changed)."""
        self.ranges = dict(x=x_range, y=y_range, yaw=yaw_range, width=width_scale, mass=mass_range,
                           stiffness=stiffness_scale, damping=damping_scale, friction=friction_scale,
                           handle_friction=handle_friction_range, handle_stiffness=handle_stiffness_scale)
        self.nominal_physics = torch.tensor(
            [0.0, 0.0, 0.0, 1.0, model.body_mass[self.panel], model.jnt_stiffness[self.hinge],
             model.dof_damping[self.hinge_dof], model.dof_frictionloss[self.hinge_dof],
             model.geom_friction[self.handle_geoms[0], 0], model.jnt_stiffness[self.handle]], dtype=torch.float32)
        self.physics = self.nominal_physics.to(env.device).repeat(env.num_envs, 1)
        """(num_envs, 10): each env's draw, columns `PHYSICS_COLUMNS`."""

    def __call__(self, env, env_ids: torch.Tensor) -> None:
        n = len(env_ids)
        columns = []
        # Offsets and the width scale are drawn as they are, physics either as values or as factors on the nominal.
        for k, (key, factor) in enumerate((("x", False), ("y", False), ("yaw", False), ("width", False), ("mass", False),
                                           ("stiffness", True), ("damping", True), ("friction", True),
                                           ("handle_friction", False), ("handle_stiffness", True))):
            nominal = float(self.nominal_physics[k])
            if self.ranges[key] is None:
                columns.append(torch.full((n,), nominal, device=env.device))
            else:
                value = env.uniform(n, *self.ranges[key])
                columns.append(value * nominal if factor else value)
        drawn = torch.stack(columns, dim=1)
        self.physics[env_ids] = drawn
        self._write_params(env_ids, drawn.cpu().double())

    def _write_params(self, env_ids: torch.Tensor, drawn: torch.Tensor) -> None:
        """The rows this event owns, from the nominal model and the draw; the fields' other rows keep the world's values."""
        x, y, yaw, width, mass, stiffness, damping, friction, handle_friction, handle_stiffness = drawn.unbind(1)
        sim, m = self.env.sim, self.model
        ids = env_ids.to(sim.device)
        # float64 as the C backend keeps them (mujoco_warp casts to its float32 when they are written).
        fields = {name: sim.get_params(name)[ids].cpu().double() for name in _FIELDS}

        def nominal(name, rows):
            return torch.as_tensor(getattr(m, name)[rows], dtype=torch.float64)

        # Pose: an offset on the mount and a turn about its z axis (q = q_yaw ⊗ q_nominal).
        fields["body_pos"][:, self.body] = nominal("body_pos", self.body) + torch.stack([x, y, torch.zeros_like(x)], dim=1)
        fields["body_quat"][:, self.body] = quat_mul(yaw_to_quat(yaw), nominal("body_quat", self.body).expand(len(yaw), 4))
        # Width: the latch side moves toward the hinge (local +y) by the width lost; spanning parts shrink.
        lost = (self.width * (1.0 - width))[:, None]
        shift_y = torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64)
        fields["body_pos"][:, self.shifted_bodies] = nominal("body_pos", self.shifted_bodies) + lost[:, :, None] * shift_y
        fields["geom_pos"][:, self.shifted_geoms] = nominal("geom_pos", self.shifted_geoms) + lost[:, :, None] * shift_y
        fields["geom_pos"][:, self.spanning_geoms] = nominal("geom_pos", self.spanning_geoms) + lost[:, :, None] / 2 * shift_y
        fields["geom_size"][:, self.spanning_geoms] = nominal("geom_size", self.spanning_geoms) - lost[:, :, None] / 2 * shift_y
        fields["body_ipos"][:, self.panel] = nominal("body_ipos", self.panel) + lost / 2 * shift_y
        # The panel: a uniform box of the drawn mass and width, I = m/3 · (b² + c²) about each axis (half sizes).
        sq = fields["geom_size"][:, self.panel_geom].square()
        fields["body_mass"][:, self.panel] = mass
        fields["body_inertia"][:, self.panel] = mass[:, None] / 3.0 * torch.stack(
            [sq[:, 1] + sq[:, 2], sq[:, 0] + sq[:, 2], sq[:, 0] + sq[:, 1]], dim=1)
        # Springs, damping, friction.
        fields["jnt_stiffness"][:, self.hinge] = stiffness
        fields["jnt_stiffness"][:, self.handle] = handle_stiffness
        fields["dof_damping"][:, self.hinge_dof] = damping
        fields["dof_frictionloss"][:, self.hinge_dof] = friction
        fields["geom_friction"][:, self.handle_geoms, 0] = handle_friction[:, None]
        sim.set_params(ids, **fields)


_FIELDS = ("body_pos", "body_quat", "body_ipos", "body_mass", "body_inertia", "geom_pos", "geom_size", "geom_friction",
           "jnt_stiffness", "dof_damping", "dof_frictionloss")
"""Model fields `RandomizeDoor` writes."""


def _ids(model: mujoco.MjModel, kind: mujoco.mjtObj, names, present_only: bool = False) -> list[int]:
    """Ids of named bodies or geoms; absent names are an error, or skipped with `present_only`."""
    ids = [mujoco.mj_name2id(model, kind, name) for name in names]
    missing = [name for name, i in zip(names, ids) if i < 0]
    if missing and not present_only:
        raise KeyError(f"the scene has no {kind.name.removeprefix('mjOBJ_').lower()} {missing} "
                       "(attach the door with batonlab.robots.door.attach_door)")
    return [i for i in ids if i >= 0]
