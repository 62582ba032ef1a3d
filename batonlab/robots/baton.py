# SPDX-License-Identifier: BSD-3-Clause
"""The relay baton and the hand that holds it out: a free baton standing in an open cup on a mocap body (the
holder), which a task moves along a path (`batonlab.events.holder`). A gripper takes the baton by closing on it and
lifting it out of the cup; nothing else holds it.

The holder's geoms touch the baton and robot links (conaffinity 1 | 2); its stand is drawn only. Geoms under a mocap
body follow it at every step on both backends (see `batonlab.robots.door`).
"""

from __future__ import annotations

import mujoco

HOLDER_BODY = "baton_holder"
"""The mocap body carrying the cup; its origin is the centre of the cup's floor."""

BATON_BODY = "baton"
"""The free baton (a free joint and a capsule geom of the same name)."""

BATON_RADIUS, BATON_HALF_LENGTH = 0.015, 0.09
"""The capsule's radius and the half length of its cylinder [m] (0.21 m long in all)."""

BATON_MASS = 0.15
"""[kg]"""

CUP_INNER_HALF_WIDTH, CUP_DEPTH = 0.019, 0.07
"""The cup's inner half width and its walls' height above its floor [m]."""

BATON_REST_HEIGHT = BATON_HALF_LENGTH + BATON_RADIUS
"""The baton's centre above the cup's floor when it stands in the cup [m]."""

BATON_POS_W_SENSOR, BATON_POS_B_SENSOR = "baton_pos_w", "baton_pos_b"
"""framepos of the baton's centre in the world and in the robot's arm base frame [m]."""

BATON_AXIS_B_SENSOR = "baton_axis_b"
"""The baton's long axis in the arm base frame (simulation only)."""

HOLDER_POS_B_SENSOR = "baton_holder_pos_b"
"""framepos of the cup's floor centre in the arm base frame [m]."""

UP_B_SENSOR = "world_up_b"
"""The world's up direction in the arm base frame (simulation only)."""


def pad_on_baton_sensor(pad: str) -> str:
    """Name of the sensor counting a finger pad's contacts with the baton."""
    return f"{pad}_on_{BATON_BODY}"


def add_baton_holder(spec: mujoco.MjSpec, pos: tuple[float, float, float], base_site: str,
                     pads: tuple[str, ...]) -> None:
    """Add the holder (mocap) at `pos` (its cup's floor [m, world]) with the baton standing in it, and the baton's
    sensors: world and `base_site`-frame positions, its axis, the world's up direction in that frame, and the contact
    counts of each of `pads` with it."""
    holder = spec.worldbody.add_body(name=HOLDER_BODY, mocap=True, pos=list(pos))
    touches = {"contype": 0, "conaffinity": 1 | 2, "rgba": [0.2, 0.45, 0.8, 1.0]}
    wall = CUP_INNER_HALF_WIDTH + 0.005
    holder.add_geom(name="baton_cup_floor", type=mujoco.mjtGeom.mjGEOM_BOX, size=[wall + 0.005, wall + 0.005, 0.005],
                    pos=[0, 0, -0.005], **touches)
    for k, (x, y) in enumerate(((wall, 0.0), (-wall, 0.0), (0.0, wall), (0.0, -wall))):
        half = [0.005, wall + 0.005, CUP_DEPTH / 2] if x else [wall + 0.005, 0.005, CUP_DEPTH / 2]
        holder.add_geom(name=f"baton_cup_wall{k}", type=mujoco.mjtGeom.mjGEOM_BOX, size=half,
                        pos=[x, y, CUP_DEPTH / 2], **touches)
    holder.add_geom(name="baton_holder_stand", type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[0.012, 0, 0],
                    fromto=[0, 0, -pos[2], 0, 0, -0.01], contype=0, conaffinity=0, group=1, rgba=[0.4, 0.4, 0.45, 1.0])
    baton = spec.worldbody.add_body(name=BATON_BODY, pos=[pos[0], pos[1], pos[2] + BATON_REST_HEIGHT + 0.001])
    baton.add_freejoint(name=BATON_BODY)
    baton.add_geom(name=BATON_BODY, type=mujoco.mjtGeom.mjGEOM_CAPSULE, size=[BATON_RADIUS, BATON_HALF_LENGTH, 0],
                   mass=BATON_MASS, friction=[1.0, 0.005, 0.0001], condim=4, rgba=[0.95, 0.75, 0.1, 1.0])
    baton.add_site(name=f"{BATON_BODY}_center", size=[0.005, 0, 0], rgba=[0, 0, 0, 0])
    site, center = mujoco.mjtObj.mjOBJ_SITE, f"{BATON_BODY}_center"
    spec.add_sensor(name=BATON_POS_W_SENSOR, type=mujoco.mjtSensor.mjSENS_FRAMEPOS, objtype=site, objname=center)
    spec.add_sensor(name=BATON_POS_B_SENSOR, type=mujoco.mjtSensor.mjSENS_FRAMEPOS, objtype=site, objname=center,
                    reftype=site, refname=base_site)
    spec.add_sensor(name=BATON_AXIS_B_SENSOR, type=mujoco.mjtSensor.mjSENS_FRAMEZAXIS, objtype=site, objname=center,
                    reftype=site, refname=base_site)
    spec.add_sensor(name=HOLDER_POS_B_SENSOR, type=mujoco.mjtSensor.mjSENS_FRAMEPOS, objtype=mujoco.mjtObj.mjOBJ_XBODY,
                    objname=HOLDER_BODY, reftype=site, refname=base_site)
    spec.add_sensor(name=UP_B_SENSOR, type=mujoco.mjtSensor.mjSENS_FRAMEZAXIS, objtype=mujoco.mjtObj.mjOBJ_XBODY,
                    objname="world", reftype=site, refname=base_site)
    for pad in pads:
        spec.add_sensor(name=pad_on_baton_sensor(pad), type=mujoco.mjtSensor.mjSENS_CONTACT,
                        objtype=mujoco.mjtObj.mjOBJ_GEOM, objname=pad, reftype=mujoco.mjtObj.mjOBJ_GEOM,
                        refname=BATON_BODY, intprm=[1, 1, 1])
