# SPDX-License-Identifier: BSD-3-Clause
"""`arm_push_grasp`: a flat box lies on the table, too wide to grasp from above; the arm pushes it
until it overhangs the table's front edge (or stands it on edge), grasps it between the finger pads and lifts it 10 cm.

The box is 24 × 16 × 4 cm (randomised down to 80 %): both sides of its top exceed the gripper's
7.8 cm opening, so the only grasp is across its thickness, which needs an edge in the air: over the
table top's front edge (x = 0.55 m, within reach) or with the box pivoted up. The reward is
`arm_lift`'s (reach, lift in hand, success), with "in hand" widened to the box's half length and
requiring both finger pads on it, plus a push toward the edge (full once the box overhangs it by 5 cm).

Privileges (λ = 1 at the start, lowered by `PrivilegeSchedule`): the box starts λ · 13 cm closer to the
table's edge (`HeadStart`: at λ = 1 it already overhangs, at λ = 0 it must be pushed there); a virtual
force pulls the box toward the tool point and carries its weight while both finger pads touch it; the
gripper passes through the table; the box slides on a slippery table. The published finding this task reproduces
(`bench/privileged.py`): without privileges the policy parks the gripper on the box and never lifts it.
"""

from __future__ import annotations

import mujoco

from batonlab.env.cfg import PrivilegeTermCfg, RewardTermCfg, SceneCfg, TaskCfg
from batonlab.privileges import HeadStart, RelaxedContacts
from batonlab.rewards import manipulation
from batonlab.rl.cfg import RunnerCfg
from batonlab.robots.arm6 import home_pose
from batonlab.tasks import register
from batonlab.tasks.arm_lift import make_arm_lift_cfg
from batonlab.tasks.grasping import privilege_schedule, teacher_agent_cfg
from batonlab.tasks.table_scene import (FINGER_PADS, add_box_object, add_gripper_table_pairs, make_table_arm_spec,
                                        pad_contact_sensor)

BOX_HALF = (0.12, 0.08, 0.02)
"""Nominal half sizes of the flat box [m]."""

TABLE_EDGE_X = 0.55
"""The table's front edge in this task [m]: the box must overhang it to be grasped."""

PAD_CONTACTS = tuple(pad_contact_sensor(pad, "object") for pad in FINGER_PADS)
"""Contact counts of the finger pads with the box: both non-zero is a grasp."""

HEAD_START = 0.13
"""At λ = 1 the box starts this much closer to the edge [m]: from x ∈ (0.3, 0.4) to (0.43, 0.5), overhanging
it by up to ~9 cm with its centre of mass 5 cm or more over the table."""

PUSH_GOAL_X = TABLE_EDGE_X - BOX_HALF[0] + 0.05
"""The push reward is full once the box's centre is here [m, x]: the nominal box then overhangs the edge by 5 cm."""

ITERATIONS = 600
"""The teacher's training budget; λ is 0 by 60 % of it."""

IN_HAND_RADIUS = 0.15
"""The box counts as in hand within this distance of the tool point [m] (grasped by an edge, its
centre is up to its half length away) and with both finger pads on it: a first training that
counted the distance alone learned to stand the box on edge and clamp it between the arm's links."""


def make_push_grasp_spec() -> mujoco.MjSpec:
    """Arm6 on a shorter table (front edge at `TABLE_EDGE_X`), the flat box, switchable contacts."""
    spec = make_table_arm_spec()
    table = spec.geom("table")
    back = table.pos[0] - table.size[0]
    table.size = [(TABLE_EDGE_X - back) / 2, table.size[1], table.size[2]]
    table.pos = [(TABLE_EDGE_X + back) / 2, table.pos[1], table.pos[2]]
    add_box_object(spec, "object", BOX_HALF, mass=0.2, pos=(0.35, 0.0, BOX_HALF[2] + 0.001), friction=0.8,
                   rgba=(0.2, 0.45, 0.85, 1.0))
    add_gripper_table_pairs(spec)
    return spec


def make_arm_push_grasp_cfg(play: bool = False) -> TaskCfg:
    """`arm_lift` with the flat box on the shorter table, a longer episode, a grasp that needs the
    fingertips on the box, and a slippery table among the privileges."""
    cfg = make_arm_lift_cfg(play)
    if not play:
        cfg.curriculum = privilege_schedule(ITERATIONS)
    cfg.scene = SceneCfg(build=make_push_grasp_spec, default_joint_pos=home_pose(), camera="overview")
    cfg.episode_length_s = 6.0
    lift = {**cfg.success.params, "radius": IN_HAND_RADIUS, "touch_sensors": PAD_CONTACTS}
    for term in (cfg.rewards["lift"], cfg.rewards["lifted"], cfg.success):
        term.params = dict(lift)
    cfg.rewards["push"] = RewardTermCfg(func=manipulation.object_pushed_to,
                                        params={"body": "object", "x": PUSH_GOAL_X, "std": 0.1}, weight=2.0)
    cfg.events["object"].params.update(x_range=(0.3, 0.4), y_range=(-0.1, 0.1), yaw_range=(-0.3, 0.3),
                                       mass_range=(0.1, 0.3), friction_range=(0.5, 1.0))
    cfg.privileges["attraction"].params["touch_sensors"] = PAD_CONTACTS  # carry its weight while pinched
    cfg.observations["privileged"].terms["contacts"].params["sensors"] = PAD_CONTACTS
    cfg.privileges["head_start"] = PrivilegeTermCfg(
        func=HeadStart, params={"body": "object", "shift": (HEAD_START, 0.0), "max_x": TABLE_EDGE_X - 0.05})
    cfg.privileges["slippery_table"] = PrivilegeTermCfg(
        func=RelaxedContacts, params={"pairs": ("object_table",), "threshold": 0.25, "mode": "soften",
                                      "friction_scale": 0.2, "timeconst_scale": 1.0})
    return cfg


def make_arm_push_grasp_agent_cfg() -> RunnerCfg:
    return teacher_agent_cfg("arm_push_grasp", max_iterations=ITERATIONS, gamma=0.99)


register("arm_push_grasp", make_arm_push_grasp_cfg, make_arm_push_grasp_agent_cfg,
         "table-mounted arm6 pushes a flat box over the table edge, grasps and lifts it")
