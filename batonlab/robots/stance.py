# SPDX-License-Identifier: BSD-3-Clause
"""How a floating-base robot stands, read from its model in the default pose on flat ground.

Design and contract notes: docs/modules/batonlab.robots.stance.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

from batonlab.robots.assets import compile_spec

FOOT_TOLERANCE = 0.02
"""Ground geoms this close to the robot's lowest point in the default pose belong to feet [m]."""

MIRROR_TOLERANCE = 1e-3
"""Largest mismatch of mirrored joint anchors [m] and axes [-]."""

GROUND_COLLISION_BIT = 1
"""contype/conaffinity bit of the ground (`batonlab.terrain`): geoms that share it touch the ground."""

_DISTANCE_MAX = 1e3
"""Search radius of `mj_geomDistance` [m]; any robot is closer than this to the plane below it."""


@dataclass(frozen=True)
class NoContactLink:
    """A link that must never touch the ground: one body, or a whole subtree that carries no foot."""

    body: str
    subtree: bool
    """True: the body and everything below it (e.g. an arm); False: the body alone (it carries a foot)."""


@dataclass(frozen=True)
class Stance:
    """Where and how a floating-base robot stands (see the module docstring)."""

    root_body: str
    """The body on the free joint."""
    feet: tuple[str, ...]
    """Bodies meant to touch the ground, in model order."""
    foot_geoms: tuple[str, ...]
    """Ground geoms of the feet, in model order (every one of them touches the ground when standing)."""
    foot_points: tuple[str, ...]
    """Per foot, its lowest ground geom: its centre is the foot's reference point."""
    standing_height: float
    """Height of the root body's origin above flat ground in the default pose [m]."""
    foot_point_height: float
    """Mean height of the feet's reference points above the ground in the default pose [m]."""
    legs: tuple[str, ...]
    """Actuated joints between the root and a foot (wheels included), in model order."""
    riders: tuple[str, ...]
    """Actuated joints off the legs (an arm on the base), in model order."""
    mirror: tuple[tuple[str, ...], tuple[str, ...]]
    """(left, right) leg joints, pairwise mirrored; left is the +y side of the root."""
    no_contact_links: tuple[NoContactLink, ...]
    """Links that must never touch the ground, in model order."""


def name_ground_geoms(spec: mujoco.MjSpec) -> None:
    """Name the unnamed ground geoms `<body>_ground_<k>`, so that terms can address them by name."""
    for body in spec.worldbody.find_all(mujoco.mjtObj.mjOBJ_BODY):
        unnamed = [g for g in body.geoms if not g.name and _touches_ground(g.contype, g.conaffinity)]
        for k, geom in enumerate(unnamed):
            geom.name = f"{body.name}_ground_{k}"


def read_stance(spec: mujoco.MjSpec, default_joint_pos: dict[str, float], actuated: tuple[str, ...]) -> Stance:
    """The stance of the robot of `spec` (one root body with a free joint; `spec` is not changed).

    Args:
        spec: The robot alone, as `batonlab.robots.load` returns it.
        default_joint_pos: Default pose by joint name [rad or m]; other joints stay at `qpos0`.
        actuated: The actuated joints, in model order.

    Raises:
        ValueError: no free joint on the root, no ground geom, or no actuated joint on the way to a foot.
    """
    probe = spec.copy()
    plane = probe.worldbody.add_geom(name="__stance_ground__", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 1])
    model = compile_spec(probe)
    root = _root(model)
    data = mujoco.MjData(model)
    for name, value in default_joint_pos.items():
        data.qpos[model.jnt_qposadr[model.joint(name).id]] = value
    mujoco.mj_kinematics(model, data)

    ground = [g for g in range(model.ngeom)
              if model.geom_bodyid[g] != 0 and _touches_ground(model.geom_contype[g], model.geom_conaffinity[g])]
    if not ground:
        raise ValueError(f"robot '{model.body(root).name}' has no geom that collides with the ground "
                         f"(contype or conaffinity bit {GROUND_COLLISION_BIT})")
    plane_id = model.geom(plane.name).id
    low = {g: mujoco.mj_geomDistance(model, data, g, plane_id, _DISTANCE_MAX, None) for g in ground}
    lowest = min(low.values())
    foot_ids = sorted({int(model.geom_bodyid[g]) for g in ground if low[g] <= lowest + FOOT_TOLERANCE})
    foot_geoms = [g for g in ground if int(model.geom_bodyid[g]) in foot_ids]
    points = [min((g for g in foot_geoms if model.geom_bodyid[g] == b), key=lambda g: (low[g], g)) for b in foot_ids]

    chain = _ancestors_or_self(model, foot_ids)
    legs = tuple(j for j in actuated if int(model.jnt_bodyid[model.joint(j).id]) in chain)
    if not legs:
        feet = [model.body(b).name for b in foot_ids]
        raise ValueError(f"no actuated joint moves the feet {feet} of robot '{model.body(root).name}' "
                         f"(the bodies lowest in the default pose)")

    return Stance(
        root_body=model.body(root).name,
        feet=tuple(model.body(b).name for b in foot_ids),
        foot_geoms=tuple(model.geom(g).name for g in foot_geoms),
        foot_points=tuple(model.geom(g).name for g in points),
        standing_height=round(float(data.xpos[root, 2]) - lowest, 3),
        foot_point_height=round(float(np.mean([data.geom_xpos[g, 2] for g in points])) - lowest, 3),
        legs=legs,
        riders=tuple(j for j in actuated if j not in legs),
        mirror=_mirror_pairs(model, data, root, legs),
        no_contact_links=_no_contact_links(model, ground, foot_ids, chain),
    )


# Private helpers.


def _touches_ground(contype: int, conaffinity: int) -> bool:
    return bool((int(contype) | int(conaffinity)) & GROUND_COLLISION_BIT)


def _root(model: mujoco.MjModel) -> int:
    free = [j for j in range(model.njnt) if int(model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE)]
    roots = {int(model.jnt_bodyid[j]) for j in free if int(model.body_parentid[model.jnt_bodyid[j]]) == 0}
    if len(roots) != 1:
        raise ValueError("the robot needs exactly one root body on a free joint (a floating base)")
    return roots.pop()


def _ancestors_or_self(model: mujoco.MjModel, bodies: list[int]) -> set[int]:
    chain: set[int] = set()
    for body in bodies:
        while body != 0:
            chain.add(body)
            body = int(model.body_parentid[body])
    return chain


def _mirror_pairs(model, data, root: int, legs: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Leg joints mirrored across the root's x-z plane with equal positions for a symmetric pose.

    Reflecting y → -y maps a hinge's rotation about axis a to a rotation by the same angle about
    (-a_x, a_y, -a_z), and a slide along a to a slide along (a_x, -a_y, a_z).
    """
    rotation = data.xmat[root].reshape(3, 3)
    frames = {}
    for name in legs:
        j = model.joint(name).id
        anchor = rotation.T @ (data.xanchor[j] - data.xpos[root])
        axis = rotation.T @ data.xaxis[j]
        hinge = int(model.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_HINGE)
        frames[name] = (anchor, axis, hinge)
    left, right = [], []
    for name, (anchor, axis, hinge) in frames.items():
        if anchor[1] <= MIRROR_TOLERANCE:
            continue
        image = anchor * np.array([1.0, -1.0, 1.0])
        image_axis = axis * (np.array([-1.0, 1.0, -1.0]) if hinge else np.array([1.0, -1.0, 1.0]))
        for other, (other_anchor, other_axis, other_hinge) in frames.items():
            if (other not in right and other_hinge == hinge
                    and np.abs(other_anchor - image).max() <= MIRROR_TOLERANCE
                    and np.abs(other_axis - image_axis).max() <= MIRROR_TOLERANCE):
                left.append(name)
                right.append(other)
                break
    return tuple(left), tuple(right)


def _no_contact_links(model, ground: list[int], feet: list[int], chain: set[int]) -> tuple[NoContactLink, ...]:
    """Each non-foot body with a ground geom; off the legs, the highest body of its foot-free subtree."""
    links: dict[int, bool] = {}
    for body in sorted({int(model.geom_bodyid[g]) for g in ground} - set(feet)):
        if body in chain:
            links[body] = False
            continue
        while int(model.body_parentid[body]) not in chain | {0}:
            body = int(model.body_parentid[body])
        links[body] = True
    return tuple(NoContactLink(model.body(b).name, subtree) for b, subtree in sorted(links.items()))
