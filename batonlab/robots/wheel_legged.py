# SPDX-License-Identifier: BSD-3-Clause
"""The batonlab wheel-legged biped (`assets/wheel_legged/wheel_legged.xml`), with or without arm6 on top.

The base model has no arm; `make_wheel_legged_spec(with_arm=True)` attaches arm6 with `MjSpec.attach`
on the torso's `arm_mount` site, adds a contact sensor on the arm's links and extends the `home`
keyframe with the arm's stowed pose.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import mujoco

from batonlab.robots.arm6 import ARM_JOINTS, GRIPPER_JOINT, attach_arm6
from batonlab.robots.assets import compile_spec, load_spec

LEG_JOINTS: tuple[str, ...] = ("left_hip_pitch", "left_knee_pitch", "right_hip_pitch", "right_knee_pitch")
"""Position-controlled leg joints, in policy order."""

WHEEL_JOINTS: tuple[str, ...] = ("left_wheel", "right_wheel")
"""Velocity-controlled, continuous wheel joints, in policy order."""

ROOT_JOINT = "root"
"""The free joint of the torso (`base` body): qpos = (pos_w, quat_wxyz), qvel = (lin_vel_w, ang_vel_b)."""

BASE_BODY = "base"
WHEEL_RADIUS = 0.10
"""Radius of the wheels' collision spheres [m]."""

HALF_TRACK = 0.215
"""Half the distance between the wheels' ground contacts [m] (a differential drive's lever for the yaw rate)."""

NOMINAL_BASE_HEIGHT = 0.463
"""Torso height above flat ground in the `home` pose [m]."""

CROUCH_POSE: dict[str, float] = {
    "left_hip_pitch": -1.1,
    "left_knee_pitch": 2.2,
    "right_hip_pitch": -1.1,
    "right_knee_pitch": 2.2,
}
"""Legs folded with the wheels under the base (torso 0.32 m above flat ground): where a stopped
robot lowers itself before its legs are damped, so that it sits down instead of falling [rad]."""

CROUCH_TIME_S = 1.5
"""Time a stopping robot takes to lower itself into `CROUCH_POSE` [s]."""

ARM_STOWED_POSE: dict[str, float] = {
    "shoulder_yaw": 0.0,
    "shoulder_pitch": -1.2,
    "elbow_pitch": 2.4,
    "forearm_roll": 0.0,
    "wrist_pitch": 1.2,
    "wrist_roll": 0.0,
    GRIPPER_JOINT: 0.0,
    "finger_right": 0.0,
}
"""Arm folded back over the torso (upper arm back, forearm and gripper forward-down) [rad or m]."""

GROUND_CONTACT_SENSORS: tuple[str, ...] = ("torso_ground_contact", "left_thigh_ground_contact", "right_thigh_ground_contact")
"""Contact sensors (data: found, net force) of links that must never touch the ground."""

ARM_GROUND_CONTACT_SENSOR = "arm_ground_contact"
"""Contact sensor of the arm's links against the ground, present only with the arm."""


def make_wheel_legged_spec(with_arm: bool = True) -> mujoco.MjSpec:
    """A fresh, editable spec of the robot; its root body is `base` (free joint `root`)."""
    spec = load_spec("wheel_legged", "wheel_legged.xml")
    if with_arm:
        mount = spec.site("arm_mount")
        frame = spec.body(BASE_BODY).add_frame(name="arm_frame", pos=mount.pos, quat=mount.quat)
        attach_arm6(spec, frame)
        spec.add_sensor(
            name=ARM_GROUND_CONTACT_SENSOR,
            type=mujoco.mjtSensor.mjSENS_CONTACT,
            objtype=mujoco.mjtObj.mjOBJ_XBODY,
            objname="arm_base",
            reftype=mujoco.mjtObj.mjOBJ_BODY,
            refname="world",
            intprm=[_CONTACT_DATA_FOUND_FORCE, _CONTACT_REDUCE_NETFORCE, 1],
        )
        _extend_home_key(spec)
    return spec


def home_pose(with_arm: bool = True) -> dict[str, float]:
    """Joint positions of the `home` keyframe by joint name (legs, wheels, stowed arm) [rad or m]."""
    model = compile_spec(make_wheel_legged_spec(with_arm))
    key = model.key("home")
    return {
        model.joint(j).name: float(key.qpos[model.jnt_qposadr[j]])
        for j in range(model.njnt)
        if int(model.jnt_type[j]) != int(mujoco.mjtJoint.mjJNT_FREE)
    }


@dataclass(frozen=True)
class ArmGeometry:
    """Where the arm sits on the base, read from the composed model in its `home` pose [m]."""

    mount_offset: tuple[float, float, float]
    """Origin of the arm base frame (`arm_base_site`) in the base body frame."""
    shoulder: tuple[float, float, float]
    """Shoulder pitch axis (origin of `upper_arm_link`) in the arm base frame."""
    stowed_ee: tuple[float, float, float]
    """Tool-centre point of the stowed arm in the arm base frame (what `ee_pos_b` reads)."""
    stowed_ee_quat: tuple[float, float, float, float]
    """Tool orientation of the stowed arm in the arm base frame (w, x, y, z; what `ee_quat_b` reads)."""


@functools.cache
def arm_geometry() -> ArmGeometry:
    """The arm's mount, shoulder and stowed tool pose (one forward-kinematics pass, cached)."""
    model = compile_spec(make_wheel_legged_spec(with_arm=True))
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("home").id)
    mujoco.mj_forward(model, data)  # positions and the sensors that read them

    def in_frame(point, origin, rotation):
        return tuple(float(v) for v in rotation.reshape(3, 3).T @ (point - origin))

    base = data.body(BASE_BODY)
    arm_base = data.site("arm_base_site")
    return ArmGeometry(
        mount_offset=in_frame(arm_base.xpos, base.xpos, base.xmat),
        shoulder=in_frame(data.body("upper_arm_link").xpos, arm_base.xpos, arm_base.xmat),
        stowed_ee=in_frame(data.site("ee").xpos, arm_base.xpos, arm_base.xmat),
        stowed_ee_quat=tuple(float(v) for v in data.sensor("ee_quat_b").data),
    )


def arm_joints() -> tuple[str, ...]:
    """The arm joints driven by position servos, including the gripper finger."""
    return (*ARM_JOINTS, GRIPPER_JOINT)


# Private helpers.

# MuJoCo's contact sensor packs its options in intprm: (data bits, reduce mode, num).
_CONTACT_DATA_FOUND_FORCE = 1 | 2
_CONTACT_REDUCE_NETFORCE = 3


def _extend_home_key(spec: mujoco.MjSpec) -> None:
    """Rewrite the `home` key for the composed model: robot part unchanged, arm stowed."""
    model = compile_spec(spec)
    key = spec.key("home")
    robot_qpos = list(key.qpos)
    qpos = list(model.qpos0)
    qpos[: len(robot_qpos)] = robot_qpos
    for name, value in ARM_STOWED_POSE.items():
        qpos[int(model.jnt_qposadr[model.joint(name).id])] = value
    ctrl = [0.0] * model.nu
    for a in range(model.nu):
        joint = model.joint(int(model.actuator_trnid[a, 0])).name
        ctrl[a] = qpos[int(model.jnt_qposadr[model.joint(joint).id])]
    for a in range(model.nu):
        if int(model.actuator_biastype[a]) == int(mujoco.mjtBias.mjBIAS_AFFINE) and model.actuator_biasprm[a, 1] == 0.0:
            ctrl[a] = 0.0  # velocity servos (wheels) hold zero speed
    key.qpos = qpos
    key.ctrl = ctrl
