# SPDX-License-Identifier: BSD-3-Clause
"""A small URDF arm with STL meshes, written on demand, for tests of `batonlab.robots.load`.

`write_urdf_arm(folder)` lays out a ROS-style package plus a robot description::

    folder/
      test_arm.yaml                       robot description (package_roots maps the package to the folder below)
      test_arm_description/
        meshes/link_box.stl               visual meshes, referenced as package://test_arm_description/meshes/...
        meshes/link_cylinder.stl          collision meshes, referenced by a path relative to the URDF
        urdf/test_arm.urdf

The arm: a fixed `base_link`, five revolute joints (yaw, pitch, pitch, pitch, continuous roll) and a
`tool0` link on a fixed joint. `ARM_JOINTS` is the table the URDF is written from, so a test can
compute forward kinematics without MuJoCo.

`write_urdf_arm(folder, gripper=True)` gives the arm a two-finger gripper instead, as vendor arms come:
a `hand` link on `tool0`, `finger_left` (prismatic) and `finger_right` (a URDF `<mimic>` of it), and the
description `test_arm_gripper.yaml`, whose tool centre point sits `TCP_OFFSET_M` past the hand
(`ee_site: {parent: hand, pos: ...}`) and whose fingers are held (`held_joints`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import yaml

PACKAGE = "test_arm_description"
"""The ROS package name used in `package://` URIs."""

ARM_JOINTS: tuple[dict, ...] = (
    dict(name="shoulder_yaw", parent="base_link", child="link1", xyz=(0.0, 0.0, 0.10), rpy=(0.0, 0.0, 0.0),
         axis=(0, 0, 1), limit=(-2.8, 2.8), effort=60.0, velocity=2.5),
    dict(name="shoulder_pitch", parent="link1", child="link2", xyz=(0.0, 0.02, 0.08), rpy=(0.0, 0.0, 0.0),
         axis=(0, 1, 0), limit=(-1.9, 1.9), effort=60.0, velocity=2.5),
    dict(name="elbow", parent="link2", child="link3", xyz=(0.0, 0.0, 0.28), rpy=(0.0, 0.2, 0.0),
         axis=(0, 1, 0), limit=(-2.4, 2.4), effort=30.0, velocity=3.0),
    dict(name="wrist_pitch", parent="link3", child="link4", xyz=(0.0, -0.01, 0.24), rpy=(0.1, 0.0, 0.3),
         axis=(0, 1, 0), limit=(-2.0, 2.0), effort=10.0, velocity=4.0),
    dict(name="wrist_roll", parent="link4", child="link5", xyz=(0.0, 0.0, 0.06), rpy=(0.0, 0.0, 0.0),
         axis=(0, 0, 1), limit=None, effort=8.0, velocity=5.0),
)
"""The revolute joints, base to tip: origin in the parent link frame [m, rad], axis, limits [rad, N·m, rad/s]
(`limit=None`: a continuous joint)."""

TOOL_JOINT = dict(name="tool_fixed", parent="link5", child="tool0", xyz=(0.0, 0.03, 0.09), rpy=(0.0, -0.4, 0.5))
"""The fixed joint of the tool frame `tool0` (what the description's `ee_site` names)."""

LINKS: tuple[str, ...] = ("base_link", "link1", "link2", "link3", "link4", "link5")
"""The links with mass and meshes (`tool0` has neither)."""

LINK_LENGTHS = {"base_link": 0.10, "link1": 0.08, "link2": 0.28, "link3": 0.24, "link4": 0.06, "link5": 0.08}
"""Length of each link's body along its z axis [m] (mesh extent, inertia)."""

DESCRIPTION_YAML = f"""\
name: test_arm
model: {PACKAGE}/urdf/test_arm.urdf
package_roots: {{{PACKAGE}: {PACKAGE}}}
base: fixed
actuators:
  - joints: ["shoulder_.*"]
    control: position
    stiffness: 120.0
    damping: 6.0
    effort_limit: 50.0      # overrides the URDF's 60
    armature: 0.02          # velocity_limit from the URDF
  - joints: ["elbow", "wrist_.*"]
    control: position
    stiffness: 40.0
    damping: 2.0
    armature: 0.0           # effort and velocity limits from the URDF
default_joint_pos: {{"elbow": 1.0, "shoulder_pitch": 0.3, ".*": 0.0}}
ee_site: tool0
collision_exclusions: [[base_link, link3]]
"""
"""The description `write_urdf_arm` writes next to the package."""


TCP_OFFSET_M = 0.10
"""Distance of the gripper arm's tool centre point past the origin of its `hand` link, along the hand's z [m]."""

FINGER_JOINTS = ("finger_left", "finger_right")
"""The gripper's prismatic joints; `finger_right` mimics `finger_left`."""

def gripper_description() -> dict:
    """The gripper arm's description: the arm's, with rotor inertia on every joint, the finger servo, the fingers
    held open at 2 cm and the TCP `TCP_OFFSET_M` past the hand."""
    raw = yaml.safe_load(DESCRIPTION_YAML)
    raw["name"], raw["model"] = "test_arm_gripper", f"{PACKAGE}/urdf/test_arm_gripper.urdf"
    raw["actuators"][1]["armature"] = 0.02
    # finger_right follows finger_left (URDF <mimic>): only the leader is described.
    raw["actuators"].append({"joints": "finger_left", "control": "position", "stiffness": 200.0, "damping": 4.0,
                             "armature": 0.0})
    raw["default_joint_pos"]["finger_left"] = 0.02
    raw["held_joints"] = ["finger_left"]
    raw["ee_site"] = {"parent": "hand", "pos": [0.0, 0.0, TCP_OFFSET_M]}
    return raw


def write_urdf_arm(folder: str | Path, gripper: bool = False) -> Path:
    """Write the arm's package (URDF + binary STL meshes) and its description into `folder`; returns the YAML path."""
    folder = Path(folder)
    meshes, urdf_dir = folder / PACKAGE / "meshes", folder / PACKAGE / "urdf"
    meshes.mkdir(parents=True, exist_ok=True)
    urdf_dir.mkdir(parents=True, exist_ok=True)
    write_binary_stl(meshes / "link_box.stl", *box_mesh((0.035, 0.035, 0.5)))
    write_binary_stl(meshes / "link_cylinder.stl", *cylinder_mesh(radius=0.03, length=1.0))
    (urdf_dir / "test_arm.urdf").write_text(arm_urdf())
    (urdf_dir / "test_arm_gripper.urdf").write_text(arm_urdf(gripper=True))
    path = folder / ("test_arm_gripper.yaml" if gripper else "test_arm.yaml")
    path.write_text(yaml.safe_dump(gripper_description()) if gripper else DESCRIPTION_YAML)
    return path


def arm_urdf(gripper: bool = False) -> str:
    """The arm's URDF text (meshes: visual by `package://`, collision by a relative path), with or without its gripper."""
    parts = ['<?xml version="1.0"?>', '<robot name="test_arm">']
    for link in LINKS:
        length = LINK_LENGTHS[link]
        mass = 2.0 if link == "base_link" else 0.3 + 2.0 * length
        inertia = mass * (0.03**2 / 4 + length**2 / 12)
        # Collision cylinders stop short of both joints so that no two links touch in the default pose.
        collision = 0.6 * length
        parts += [
            f'  <link name="{link}">',
            f'    <inertial><origin xyz="0 0 {length / 2}"/><mass value="{mass:.4f}"/>'
            f'<inertia ixx="{inertia:.6f}" iyy="{inertia:.6f}" izz="{mass * 0.03**2 / 2:.6f}" ixy="0" ixz="0" iyz="0"/></inertial>',
            f'    <visual><origin xyz="0 0 {length / 2}"/><geometry><mesh filename="package://{PACKAGE}/meshes/link_box.stl" '
            f'scale="1 1 {length}"/></geometry></visual>',
            f'    <collision><origin xyz="0 0 {length / 2}"/><geometry><mesh filename="../meshes/link_cylinder.stl" '
            f'scale="1 1 {collision}"/></geometry></collision>',
            "  </link>",
        ]
    parts.append('  <link name="tool0"/>')
    for joint in ARM_JOINTS:
        kind = "revolute" if joint["limit"] is not None else "continuous"
        lower, upper = joint["limit"] if joint["limit"] is not None else (0.0, 0.0)
        parts += [
            f'  <joint name="{joint["name"]}" type="{kind}">',
            f'    <parent link="{joint["parent"]}"/><child link="{joint["child"]}"/>',
            f'    <origin xyz="{_vec(joint["xyz"])}" rpy="{_vec(joint["rpy"])}"/><axis xyz="{_vec(joint["axis"])}"/>',
            f'    <limit lower="{lower}" upper="{upper}" effort="{joint["effort"]}" velocity="{joint["velocity"]}"/>',
            '    <dynamics damping="0.1"/>',
            "  </joint>",
        ]
    parts += [
        f'  <joint name="{TOOL_JOINT["name"]}" type="fixed">',
        f'    <parent link="{TOOL_JOINT["parent"]}"/><child link="{TOOL_JOINT["child"]}"/>',
        f'    <origin xyz="{_vec(TOOL_JOINT["xyz"])}" rpy="{_vec(TOOL_JOINT["rpy"])}"/>',
        "  </joint>",
    ]
    if gripper:
        parts += _gripper_urdf()
    parts.append("</robot>")
    return "\n".join(parts) + "\n"


def _gripper_urdf() -> list[str]:
    """URDF lines of a hand on `tool0` with two prismatic fingers, the right one a `<mimic>` of the left."""

    def link(name: str, mass: float, size: float) -> list[str]:
        inertia = mass * size**2 / 6
        return [f'  <link name="{name}"><inertial><origin xyz="0 0 {size / 2}"/><mass value="{mass}"/>'
                f'<inertia ixx="{inertia:.7f}" iyy="{inertia:.7f}" izz="{inertia:.7f}" ixy="0" ixz="0" iyz="0"/>'
                f'</inertial><visual><origin xyz="0 0 {size / 2}"/><geometry><mesh filename="package://{PACKAGE}/'
                f'meshes/link_box.stl" scale="1 1 {size}"/></geometry></visual></link>']

    lines = [*link("hand", 0.4, 0.06), *link("finger_left_link", 0.05, 0.04), *link("finger_right_link", 0.05, 0.04),
             '  <joint name="hand_fixed" type="fixed"><parent link="tool0"/><child link="hand"/></joint>']
    for name, side in (("finger_left", 1), ("finger_right", -1)):
        mimic = '<mimic joint="finger_left" multiplier="1" offset="0"/>' if name == "finger_right" else ""
        lines.append(f'  <joint name="{name}" type="prismatic"><parent link="hand"/><child link="{name}_link"/>'
                     f'<origin xyz="0 0 0.06"/><axis xyz="0 {side} 0"/>'
                     f'<limit lower="0" upper="0.04" effort="20" velocity="0.2"/>{mimic}</joint>')
    return lines


def tool_position(joint_pos: dict[str, float]) -> np.ndarray:
    """Position of `tool0` in the `base_link` frame at `joint_pos` [m], by URDF forward kinematics (no MuJoCo)."""
    transform = np.eye(4)
    for joint in ARM_JOINTS:
        transform = transform @ _origin(joint["xyz"], joint["rpy"]) @ _rotation_about(joint["axis"], joint_pos[joint["name"]])
    transform = transform @ _origin(TOOL_JOINT["xyz"], TOOL_JOINT["rpy"])
    return transform[:3, 3]


# Meshes.


def box_mesh(half_size) -> tuple[np.ndarray, np.ndarray]:
    """Vertices (8, 3) [m] and outward-wound triangles (12, 3) of a box centred on the origin."""
    hx, hy, hz = half_size
    vertices = np.array([[x, y, z] for x in (-hx, hx) for y in (-hy, hy) for z in (-hz, hz)], dtype=np.float64)
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                      [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return vertices, faces


def cylinder_mesh(radius: float, length: float, segments: int = 16) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and outward-wound triangles of a cylinder along z, centred on the origin [m]."""
    angles = 2 * math.pi * np.arange(segments) / segments
    ring = np.stack([radius * np.cos(angles), radius * np.sin(angles)], axis=1)
    bottom = np.column_stack([ring, np.full(segments, -length / 2)])
    top = np.column_stack([ring, np.full(segments, length / 2)])
    vertices = np.vstack([bottom, top, [[0, 0, -length / 2]], [[0, 0, length / 2]]])
    k = np.arange(segments)
    nxt = (k + 1) % segments
    side = np.concatenate([np.stack([k, nxt, segments + nxt], 1), np.stack([k, segments + nxt, segments + k], 1)])
    caps = np.concatenate([np.stack([np.full(segments, 2 * segments), nxt, k], 1),
                           np.stack([np.full(segments, 2 * segments + 1), segments + k, segments + nxt], 1)])
    return vertices, np.concatenate([side, caps])


def write_binary_stl(path: Path, vertices: np.ndarray, faces: np.ndarray) -> None:
    """A binary STL file: 80-byte header, triangle count, then normal + 3 vertices + attribute per triangle."""
    triangles = vertices[faces]
    normals = np.cross(triangles[:, 1] - triangles[:, 0], triangles[:, 2] - triangles[:, 0])
    normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    record = np.dtype([("normal", "<f4", 3), ("vertices", "<f4", (3, 3)), ("attribute", "<u2")])
    data = np.zeros(len(faces), dtype=record)
    data["normal"], data["vertices"] = normals, triangles
    with open(path, "wb") as stream:
        stream.write(b"batonlab test mesh".ljust(80, b"\0"))
        stream.write(np.uint32(len(faces)).tobytes())
        stream.write(data.tobytes())


# Private helpers.


def _vec(values) -> str:
    return " ".join(str(float(v)) for v in values)


def _origin(xyz, rpy) -> np.ndarray:
    """URDF origin transform: translation xyz, rotation Rz(yaw) @ Ry(pitch) @ Rx(roll)."""
    roll, pitch, yaw = rpy
    transform = np.eye(4)
    transform[:3, :3] = _rot([0, 0, 1], yaw) @ _rot([0, 1, 0], pitch) @ _rot([1, 0, 0], roll)
    transform[:3, 3] = xyz
    return transform


def _rotation_about(axis, angle: float) -> np.ndarray:
    transform = np.eye(4)
    transform[:3, :3] = _rot(axis, angle)
    return transform


def _rot(axis, angle: float) -> np.ndarray:
    """Rodrigues' rotation matrix about a unit axis."""
    x, y, z = np.asarray(axis, dtype=float) / np.linalg.norm(axis)
    skew = np.array([[0, -z, y], [z, 0, -x], [-y, x, 0]])
    return np.eye(3) + math.sin(angle) * skew + (1 - math.cos(angle)) * skew @ skew
