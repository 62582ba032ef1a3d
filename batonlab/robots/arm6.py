# SPDX-License-Identifier: BSD-3-Clause
"""The batonlab 6-DoF arm with a parallel-jaw gripper (`assets/arm6/arm6.xml`)."""

from __future__ import annotations

import mujoco

from batonlab.robots.assets import attach, compile_spec, load_spec

ARM_JOINTS: tuple[str, ...] = (
    "shoulder_yaw",
    "shoulder_pitch",
    "elbow_pitch",
    "forearm_roll",
    "wrist_pitch",
    "wrist_roll",
)
"""The six arm joints, base to tip."""

GRIPPER_JOINT = "finger_left"
"""The driven finger; `finger_right` follows it through an equality constraint."""

EE_SITE = "ee"
"""Tool-centre point between the fingertips."""


def make_arm6_spec() -> mujoco.MjSpec:
    """A fresh, editable spec of the arm (its root body is `arm_base`)."""
    return load_spec("arm6", "arm6.xml")


def home_pose() -> dict[str, float]:
    """Joint positions of the `home` keyframe, by joint name [rad or m].

    Read from the MJCF so that the file stays the single source of the default pose.
    """
    model = compile_spec(make_arm6_spec())
    key = model.key("home")
    return {model.joint(j).name: float(key.qpos[model.jnt_qposadr[j]]) for j in range(model.njnt)}


def attach_arm6(parent: mujoco.MjSpec, frame: mujoco.MjsFrame) -> None:
    """Mount the arm on `frame` of `parent` (a table, a mobile base)."""
    arm = make_arm6_spec()
    # Keyframes are per-model; the parent defines its own, the defaults live in the action config.
    for key in list(arm.keys):
        arm.delete(key)
    attach(parent, arm, frame)
