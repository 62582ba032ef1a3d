# SPDX-License-Identifier: BSD-3-Clause
"""Robots from files: a URDF or MJCF plus a `RobotDescription` become an MjSpec ready to attach into a scene.

Design and contract notes: docs/modules/batonlab.robots.loader.md.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import mujoco
import numpy as np

from batonlab.robots.assets import attach
from batonlab.robots.description import (
    RobotDescription,
    RobotDescriptionError,
    SiteOffset,
    check_against_model,
    load_description,
    site_frame,
)
from batonlab.robots.model_file import RobotFile, read_robot_file

EE_SITE = "ee"
"""The end-effector site of every loaded robot."""

IMU_SITE = "imu"
"""The IMU site of every loaded robot that has one."""

ROOT_JOINT = "root"
"""Name of the free joint added to a floating base that has none in its file."""

_JOINT_TRANSMISSIONS = (mujoco.mjtTrn.mjTRN_JOINT, mujoco.mjtTrn.mjTRN_JOINTINPARENT)
_SITE_SIZE = [0.01, 0.0, 0.0]


def load(source: RobotDescription | str | Path, description: RobotDescription | str | Path | dict | None = None
         ) -> mujoco.MjSpec:
    """A fresh spec of the robot, built from its model file as its description says.

    Args:
        source: A `RobotDescription`, a description YAML file, or a model file (URDF/MJCF) whose
            description is then `description`.
        description: With a model file as `source`: its description (a `RobotDescription`, a YAML file or
            a dict); the model file replaces the description's `model`.

    Raises:
        RobotDescriptionError: the description is incomplete or does not fit the model file.
        FileNotFoundError: the model file or a mesh is missing.
    """
    desc = as_description(source, description)
    robot = read_robot_file(desc.model, desc.package_roots)
    check_against_model(desc, robot)
    spec = robot.spec
    spec.modelname = desc.name
    root = _root_body(spec, robot.path)
    _set_base(spec, root, desc.base)
    _drive_joints(spec, desc, robot)
    if desc.ee_site:
        _add_frame_site(spec, robot, desc.ee_site, desc.ee_offset, EE_SITE, "ee_site")
        _add_sensor(spec, "ee_pos_b", mujoco.mjtSensor.mjSENS_FRAMEPOS, EE_SITE, root.name)
        _add_sensor(spec, "ee_quat_b", mujoco.mjtSensor.mjSENS_FRAMEQUAT, EE_SITE, root.name)
        _add_sensor(spec, "ee_pos_w", mujoco.mjtSensor.mjSENS_FRAMEPOS, EE_SITE)
    if desc.imu_site:
        _add_frame_site(spec, robot, desc.imu_site, desc.imu_offset, IMU_SITE, "imu_site")
        _add_sensor(spec, "imu_gyro", mujoco.mjtSensor.mjSENS_GYRO, IMU_SITE)
        _add_sensor(spec, "imu_acc", mujoco.mjtSensor.mjSENS_ACCELEROMETER, IMU_SITE)
        _add_sensor(spec, "imu_quat", mujoco.mjtSensor.mjSENS_FRAMEQUAT, IMU_SITE)
    if desc.gravity_compensation:
        _compensate_gravity(spec, root, desc)
    for body1, body2 in desc.collision_exclusions:
        spec.add_exclude(bodyname1=body1, bodyname2=body2)
    for key in list(spec.keys):
        spec.delete(key)
    return spec


def attach_robot(parent: mujoco.MjSpec, frame: mujoco.MjsFrame, description: RobotDescription | str | Path | dict
                 ) -> mujoco.MjSpec:
    """Mount the robot on `frame` of `parent` (like `attach_arm6`); returns the robot's own spec.

    Names are kept as written in the robot's file (empty prefix), so policies and manifests use them.
    """
    robot = load(as_description(description))
    attach(parent, robot, frame)
    return robot


def as_description(source: RobotDescription | str | Path | dict,
                   description: RobotDescription | str | Path | dict | None = None) -> RobotDescription:
    """The `RobotDescription` named by `source` (see `load` for the accepted forms)."""
    if description is None:
        if isinstance(source, RobotDescription):
            return source
        if isinstance(source, dict) or Path(source).suffix.lower() in (".yaml", ".yml"):
            return load_description(source)
        raise RobotDescriptionError(f"{source} is a model file; pass its description too: load(model, description)")
    if isinstance(source, RobotDescription):
        raise RobotDescriptionError("load(description, ...) takes no second description")
    if isinstance(description, RobotDescription):
        return dataclasses.replace(description, model=Path(source).resolve())
    return load_description(description, model=Path(source).resolve())


def default_joint_pos(description: RobotDescription | str | Path | dict) -> dict[str, float]:
    """Default position of each actuated joint and of the joints that follow one, by name [rad or m]
    (for `SceneCfg.default_joint_pos`)."""
    desc = as_description(description)
    defaults = {j.name: j.default_pos for j in desc.joints}
    followers = read_robot_file(desc.model, desc.package_roots).followers
    for follower, (leader, offset, multiplier) in followers.items():
        if leader in defaults:
            defaults[follower] = offset + multiplier * defaults[leader]
    return defaults


def velocity_limit_numeric(joint: str) -> str:
    """Name of the model numeric holding `joint`'s velocity limit."""
    return f"{joint}_velocity_limit"


def joint_velocity_limits(model: mujoco.MjModel, joints) -> np.ndarray:
    """Velocity limit of each joint as recorded by `load` in the compiled model [rad/s or m/s]; inf where none is."""
    limits = np.full(len(joints), np.inf)
    for k, joint in enumerate(joints):
        index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_NUMERIC, velocity_limit_numeric(joint))
        if index >= 0:
            limits[k] = float(model.numeric_data[model.numeric_adr[index]])
    return limits


# Private helpers.


def _root_body(spec: mujoco.MjSpec, path: Path) -> mujoco.MjsBody:
    bodies = list(spec.worldbody.bodies)
    if len(bodies) != 1:
        raise RobotDescriptionError(f"{path} must hold one robot, a single body under the world; "
                                    f"it has {[b.name for b in bodies]}")
    return bodies[0]


def _set_base(spec: mujoco.MjSpec, root: mujoco.MjsBody, base: str) -> None:
    """A free joint on the root for a floating base (the file's own, if any), none for a fixed one."""
    free = [j for j in root.joints if j.type == mujoco.mjtJoint.mjJNT_FREE]
    if base == "fixed":
        for joint in free:
            spec.delete(joint)
    elif not free:
        root.add_freejoint(name=ROOT_JOINT)


def _drive_joints(spec: mujoco.MjSpec, desc: RobotDescription, robot: RobotFile) -> None:
    """Replace the file's actuators on the actuated joints by the description's servos."""
    actuated = set(desc.joint_names)
    renamed = {}
    for actuator in list(spec.actuators):
        if actuator.trntype in _JOINT_TRANSMISSIONS and actuator.target in actuated:
            renamed[actuator.name] = actuator.target
            spec.delete(actuator)
    for sensor in spec.sensors:
        if sensor.objtype == mujoco.mjtObj.mjOBJ_ACTUATOR and sensor.objname in renamed:
            sensor.objname = renamed[sensor.objname]
    for drive in desc.joints:
        joint = spec.joint(drive.name)
        joint.armature = drive.armature
        joint.actfrclimited = mujoco.mjtLimited.mjLIMITED_FALSE
        actuator = spec.add_actuator(name=drive.name, target=drive.name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        actuator.gear = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        if drive.control == "position":
            actuator.set_to_position(kp=drive.stiffness, kv=drive.damping)
            joint_range = robot.joint(drive.name).range
            actuator.ctrlrange = list(joint_range) if joint_range is not None else [0.0, 0.0]
            actuator.ctrllimited = (mujoco.mjtLimited.mjLIMITED_FALSE if joint_range is None
                                    else mujoco.mjtLimited.mjLIMITED_TRUE)
        else:
            actuator.set_to_velocity(kv=drive.stiffness)
            actuator.ctrlrange = [-drive.velocity_limit, drive.velocity_limit]
            actuator.ctrllimited = mujoco.mjtLimited.mjLIMITED_TRUE
        actuator.forcerange = [-drive.effort_limit, drive.effort_limit]
        actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
        spec.add_numeric(name=velocity_limit_numeric(drive.name), data=[drive.velocity_limit])


def _add_frame_site(spec: mujoco.MjSpec, robot: RobotFile, target: str, offset: SiteOffset, site: str,
                    key: str) -> None:
    """Site `site` at `offset` in the frame of body `target` or of site `target`."""
    if target == site and target in robot.sites and offset == SiteOffset():
        return
    if site in robot.sites:
        raise RobotDescriptionError(f"{key} '{target}': the model already has a different site named '{site}'")
    body, pos, quat = site_frame(robot, target, offset)
    spec.body(body).add_site(name=site, pos=list(pos), quat=list(quat), size=_SITE_SIZE, group=4)


def _compensate_gravity(spec: mujoco.MjSpec, root: mujoco.MjsBody, desc: RobotDescription) -> None:
    """Every robot body's weight cancelled, through the actuated joints' servos (within their effort limits)."""
    for body in [root, *root.find_all(mujoco.mjtObj.mjOBJ_BODY)]:
        body.gravcomp = 1.0
    for name in desc.joint_names:
        spec.joint(name).actgravcomp = True


def _add_sensor(spec: mujoco.MjSpec, name: str, kind: mujoco.mjtSensor, site: str, reference_body: str = "") -> None:
    """A sensor of `site`, in the frame of `reference_body` when given, replacing the file's sensor of that name."""
    existing = spec.sensor(name)
    if existing is not None:
        spec.delete(existing)
    if kind in (mujoco.mjtSensor.mjSENS_GYRO, mujoco.mjtSensor.mjSENS_ACCELEROMETER):
        spec.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site)
    elif reference_body:
        spec.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site,
                        reftype=mujoco.mjtObj.mjOBJ_XBODY, refname=reference_body)
    else:
        spec.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site)
