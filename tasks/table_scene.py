# SPDX-License-Identifier: BSD-3-Clause
"""The table-top scene of the arm tasks (arm6, or any arm of a robot description), and the objects the
manipulation tasks put on it.

The arm's base frame is the world frame; the table top is the plane z = 0 and spans
x ∈ [-0.15, 0.75], y ∈ [-0.6, 0.6] [m]. Objects are free bodies with a named geom, and each gets
two sensors in the arm base frame, `<name>_pos` and `<name>_quat`: what a perception node would
report as the object's pose (`sensors/<name>_pose` on the robot), and two contact sensors
`finger_{left,right}_pad_on_<name>` (simulation only: is the object between the pads).
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from batonlab.privileges import add_switchable_pair
from batonlab.robots.arm6 import attach_arm6
from batonlab.robots.description import RobotDescription
from batonlab.robots.loader import as_description, attach_robot

TABLE_TOP_Z = 0.0
"""Height of the table top in the arm base frame [m]."""

TABLE_X = (-0.15, 0.75)
"""Extent of the table top along x [m] (the far edge is where `arm_push_grasp` tips its box)."""

FINGER_PADS = ("finger_left_pad", "finger_right_pad")
"""arm6's finger pad geoms."""

GRIPPER_GEOMS = (*FINGER_PADS, "palm_collision")
"""The gripper's collision geoms (arm6), the ones a relaxed gripper–table contact lets through."""


def make_table_arm_spec() -> mujoco.MjSpec:
    """Arm6 on a table top (base frame = world frame), a target marker and an overview camera."""
    spec = make_table_spec("table_arm6")
    attach_arm6(spec, spec.worldbody.add_frame(name="arm_mount", pos=[0, 0, 0]))
    return spec


def make_table_robot_spec(description: RobotDescription | str | Path) -> mujoco.MjSpec:
    """The arm of a robot description on the table top: `make_table_arm_spec` for any arm.

    The robot's root body sits at the origin (base frame = world frame), as arm6's does; its
    end-effector sensors (`ee_pos_b`, ...) come from `batonlab.robots.load`.
    """
    description = as_description(description)
    spec = make_table_spec(f"table_{description.name}")
    attach_robot(spec, spec.worldbody.add_frame(name="arm_mount", pos=[0, 0, 0]), description)
    return spec


def make_table_spec(name: str) -> mujoco.MjSpec:
    """The table-top scene without its arm: light, floor, table, the `target` marker (mocap) and the
    `overview` camera; an arm is then attached at the origin."""
    spec = mujoco.MjSpec()
    spec.modelname = name
    spec.option.timestep = 0.005
    world = spec.worldbody
    world.add_light(pos=[0.3, -0.5, 2.0], dir=[0, 0.2, -1], diffuse=[0.8, 0.8, 0.8])
    world.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[2, 2, 0.05], pos=[0, 0, -0.75], rgba=[0.35, 0.4, 0.45, 1])
    half_x = (TABLE_X[1] - TABLE_X[0]) / 2
    world.add_geom(name="table", type=mujoco.mjtGeom.mjGEOM_BOX, size=[half_x, 0.6, 0.02],
                   pos=[TABLE_X[0] + half_x, 0, TABLE_TOP_Z - 0.02], rgba=[0.55, 0.42, 0.3, 1])
    target = world.add_body(name="target", mocap=True, pos=[0.45, 0, 0.3])
    target.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.02, 0, 0], contype=0, conaffinity=0, rgba=[0.1, 0.9, 0.2, 0.7])
    add_look_at_camera(spec, "overview", eye=(1.25, -0.95, 0.85), look=(0.3, 0.0, 0.2))
    return spec


def add_look_at_camera(spec: mujoco.MjSpec, name: str, eye, look, body: str | None = None) -> None:
    """A camera at `eye` looking at `look` (world frame, at the model's initial pose) [m]: fixed, or following `body`
    at that offset, its orientation fixed (MuJoCo's `trackcom`: for a robot that drives out of a fixed view)."""
    eye, look = np.asarray(eye, dtype=float), np.asarray(look, dtype=float)
    forward = (look - eye) / np.linalg.norm(look - eye)
    right = np.cross(forward, [0, 0, 1])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.column_stack([right, up, -forward]).flatten())
    if body is None:
        spec.worldbody.add_camera(name=name, pos=eye.tolist(), quat=quat.tolist())
        return
    follow = spec.body(body)  # a root body, unrotated at the initial pose: its frame is the world's, shifted
    spec.body(body).add_camera(name=name, pos=(eye - np.asarray(follow.pos, dtype=float)).tolist(), quat=quat.tolist(),
                               mode=mujoco.mjtCamLight.mjCAMLIGHT_TRACKCOM)


def add_box_object(spec: mujoco.MjSpec, name: str, half_size, mass: float, pos, friction: float = 1.0,
                   rgba=(0.85, 0.25, 0.2, 1.0)) -> None:
    """A free box on the table with pose sensors `<name>_pos` / `<name>_quat` in the arm base frame.

    Its geom (named `name`) touches the table through a switchable pair (`<name>_table`), so that a
    task may make the table slippery for it while privileged (`RelaxedContacts` in "soften" mode);
    it touches the gripper, walls and the floor through MuJoCo's ordinary contacts.
    """
    body = spec.worldbody.add_body(name=name, pos=list(pos))
    body.add_freejoint(name=name)
    body.add_geom(name=name, type=mujoco.mjtGeom.mjGEOM_BOX, size=list(half_size), mass=mass, rgba=list(rgba),
                  friction=[friction, 0.005, 0.0001], condim=4)
    body.add_site(name=f"{name}_center", size=[0.005, 0, 0], rgba=[0, 0, 0, 0])
    add_switchable_pair(spec, f"{name}_table", name, "table", condim=4)
    # The exclusion also drops the object's contacts with the floor: give it a pair of its own.
    spec.add_pair(name=f"{name}_floor", geomname1=name, geomname2="floor", condim=3)
    for kind, sensor in (("pos", mujoco.mjtSensor.mjSENS_FRAMEPOS), ("quat", mujoco.mjtSensor.mjSENS_FRAMEQUAT)):
        spec.add_sensor(name=f"{name}_{kind}", type=sensor, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=f"{name}_center",
                        reftype=mujoco.mjtObj.mjOBJ_SITE, refname="arm_base_site")
    # How many contacts each finger pad has with the object (MuJoCo's contact sensor, "found" count):
    # both non-zero is a pinch grasp, wherever along the pads the object sits.
    for pad in FINGER_PADS:
        spec.add_sensor(name=pad_contact_sensor(pad, name), type=mujoco.mjtSensor.mjSENS_CONTACT,
                        objtype=mujoco.mjtObj.mjOBJ_GEOM, objname=pad, reftype=mujoco.mjtObj.mjOBJ_GEOM, refname=name,
                        intprm=[1, 1, 1])


def pad_contact_sensor(pad: str, obj: str) -> str:
    """Name of the sensor counting the contacts between a finger pad and an object (`add_box_object`)."""
    return f"{pad}_on_{obj}"


def add_gripper_table_pairs(spec: mujoco.MjSpec) -> tuple[str, ...]:
    """Make the gripper–table contacts switchable; returns the pair names (for `RelaxedContacts`)."""
    names = []
    for geom in GRIPPER_GEOMS:
        add_switchable_pair(spec, f"{geom}_table", geom, "table")
        names.append(f"{geom}_table")
    return tuple(names)
