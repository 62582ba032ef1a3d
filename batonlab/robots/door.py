# SPDX-License-Identifier: BSD-3-Clause
"""The batonlab door (`assets/door/door.xml`): a hinged panel with a lever handle, a closing spring
and an optional latch, attached to any scene (a table for the arm, a floor for a wheel-legged robot).

The door's frame does not move; where it stands is the attachment frame's pose. Its geoms touch only
robot links (conaffinity 2) and, through the explicit pair `LATCH_PAIR`, each other at the latch.

A task that moves or resizes the door per world (`batonlab.events.door.RandomizeDoor` writes
`body_pos` / `body_quat` / `geom_pos` of the frame) mounts it on `add_door_mount`: mujoco_warp
places the geoms of bodies welded to the world once, when the model is uploaded, and never again,
whereas the geoms under a mocap body follow their body at every step, on both backends.
"""

from __future__ import annotations

import mujoco

from batonlab.robots.assets import attach, load_spec

DOOR_BODY = "door"
"""Root body: the static frame (posts, header, strike). Its pose is the door's pose."""

PANEL_BODY = "door_panel"
"""The swinging panel; its frame is on the hinge axis."""

PANEL_GEOM = "door_panel"
"""The panel's box (`PANEL_WIDTH` × `PANEL_HEIGHT` × `PANEL_THICKNESS`)."""

HINGE_JOINT = "door_hinge"
"""Door angle [rad]: 0 closed, + open toward the door's +x (its front), limits 0 … 1.75."""

HANDLE_JOINT = "door_handle"
"""Lever angle [rad]: 0 at rest, + pressed down, limits 0 … 0.8."""

BOLT_JOINT = "door_bolt"
"""Latch bolt retraction [m]: 0 extended, 0.04 m per radian of handle."""

DOOR_JOINTS: tuple[str, ...] = (HINGE_JOINT, HANDLE_JOINT, BOLT_JOINT)
"""Every joint of the door (with the latch), hinge first."""

HANDLE_BODY, BOLT_BODY = "door_handle", "door_bolt"
"""The lever and the latch bolt, children of the panel."""

HANDLE_SITE = "door_handle"
"""Grasp point on the lever."""

HINGE_SITE = "door_hinge"
"""On the hinge axis; its z axis is the axis (positive: opening)."""

HANDLE_GEOMS: tuple[str, ...] = ("door_handle", "door_handle_spindle")
"""The lever and its spindle: what a gripper holds (priority 1, their friction decides)."""

BOLT_GEOM, STRIKE_GEOM = "door_bolt", "door_strike"
"""The latch bolt and the strike lip on the frame."""

LATCH_PAIR = "door_latch"
"""The bolt–strike contact pair: switch it off to disable the latch (`RelaxedContacts`)."""

HANDLE_RELEASE_ANGLE = 0.5
"""Handle angle past which the bolt clears the strike [rad]."""

PANEL_WIDTH, PANEL_HEIGHT, PANEL_THICKNESS = 0.35, 0.45, 0.018
"""Nominal panel size [m]."""

WIDTH_SHIFTED_BODIES: tuple[str, ...] = (HANDLE_BODY, BOLT_BODY)
"""Bodies on the latch side: a narrower panel moves them toward the hinge by the width it loses (local +y)."""

WIDTH_SHIFTED_GEOMS: tuple[str, ...] = ("door_post_latch", STRIKE_GEOM, "door_keeper", "door_rose")
"""Geoms on the latch side (frame and panel), moved like `WIDTH_SHIFTED_BODIES`."""

WIDTH_SPANNING_GEOMS: tuple[str, ...] = (PANEL_GEOM, "door_header")
"""Geoms across the width (local y): a narrower panel shrinks them by the width lost, toward the hinge."""

# Sensors (all in the asset except the base-frame handle position, which needs the robot).
ANGLE_SENSOR = "door_angle"
"""jointpos of the hinge [rad]."""
HANDLE_ANGLE_SENSOR = "door_handle_angle"
"""jointpos of the handle [rad]."""
HANDLE_POS_W_SENSOR = "door_handle_pos_w"
"""framepos of the handle site, world frame [m]."""
HANDLE_POS_B_SENSOR = "door_handle_pos_b"
"""framepos of the handle site in the robot's base frame [m] (added by `attach_door(base_site=…)`)."""
HINGE_AXIS_SENSOR = "door_hinge_axis_w"
"""framezaxis of the hinge site: the opening axis in the world frame."""

LATCH_PARTS = {"pairs": (LATCH_PAIR,), "equalities": ("door_latch",), "geoms": (STRIKE_GEOM, "door_keeper"),
               "bodies": (BOLT_BODY,)}
"""What `latch=False` removes from the asset, in this order (references before what they refer to)."""


def add_door_mount(spec: mujoco.MjSpec, pos=(0.0, 0.0, 0.0), quat=(1.0, 0.0, 0.0, 0.0),
                   name: str = "door_mount") -> mujoco.MjsFrame:
    """A mocap body at `pos` / `quat` (world frame [m], w x y z) and a frame on it for `attach_door`,
    so that the door's pose and width may differ per world (see the module docstring)."""
    body = spec.worldbody.add_body(name=name, mocap=True, pos=list(pos), quat=list(quat))
    return body.add_frame()


def make_door_spec(latch: bool = True) -> mujoco.MjSpec:
    """A fresh, editable spec of the door; without the latch, the bolt, strike, coupling and pair are gone."""
    spec = load_spec("door", "door.xml")
    if not latch:
        for kind, names in LATCH_PARTS.items():
            lookup = {"bodies": spec.body, "geoms": spec.geom, "equalities": spec.equality, "pairs": spec.pair}[kind]
            for name in names:
                spec.delete(lookup(name))
    return spec


def attach_door(spec: mujoco.MjSpec, frame: mujoco.MjsFrame, latch: bool = True, base_site: str | None = None) -> None:
    """Place the door at `frame` of `spec`.

    Args:
        latch: Keep the latch (bolt, strike lip, handle coupling, contact pair).
        base_site: A site of the robot's base; adds `door_handle_pos_b`, the handle's position in its
            frame (what a perception node on the robot reports).
    """
    attach(spec, make_door_spec(latch), frame)
    if base_site is not None:
        spec.add_sensor(name=HANDLE_POS_B_SENSOR, type=mujoco.mjtSensor.mjSENS_FRAMEPOS, objtype=mujoco.mjtObj.mjOBJ_SITE,
                        objname=HANDLE_SITE, reftype=mujoco.mjtObj.mjOBJ_SITE, refname=base_site)
