# SPDX-License-Identifier: BSD-3-Clause
"""`arm_push_grasp`: a flat box lies on the table, too wide to grasp from above; the arm pushes it sideways
until it overhangs the table's left edge, pinches the overhanging strip across its thickness and lifts it 10 cm.

The box is 24 × 16 × 4 cm (randomised down to 90 %, 50-150 g): both sides of its top exceed the gripper's
7.8 cm opening, so the only grasp is across its thickness, fingers one above and one below, which needs an
edge in the air: the table's left edge (y = 0.2 m) beside the arm, reached with the tool pointing forward
and the wrist rolled a quarter turn. The reward is `arm_lift`'s (reach, lift in hand, success), with "in hand"
widened to the box's half length and requiring both finger pads on it, plus a push toward the edge (full
once the box overhangs it by 6 cm, its centre still 2 cm over the table). The gripper squeezes ~20 N
(`GRIP_KP`), enough to hold the box by its edge.

A shaping term pays for the finger axis turned vertical near the box (`tool_axis_aligned_near`), and
the reach term is flat near the box (std 0.3 m: 0.90 pressing on its centre, 0.74 in the pinch pose).

Privileges (λ = 1 at the start, lowered by `PrivilegeSchedule`): the box starts λ · 23 cm closer to the
edge (`HeadStart`: at λ = 1 it already overhangs, at λ = 0 it must be pushed there); the gripper passes
through the table; the box slides on a slippery table. No attraction force: with it the teacher learned
to press the box from above and let the force hold it, a grasp that is gone at λ = 0. Evidence, and why
the edge is at the side and the box light: docs/PRIVILEGES.md ("arm_push_grasp's geometry").
"""

from __future__ import annotations

import mujoco

from batonlab.env.cfg import PrivilegeTermCfg, RewardTermCfg, SceneCfg, TaskCfg, TermCfg
from batonlab.experts import PushGraspExpert
from batonlab.privileges import HeadStart, RelaxedContacts
from batonlab.rewards import manipulation
from batonlab.rl.cfg import RunnerCfg
from batonlab.robots.arm6 import home_pose
from batonlab.tasks import register
from batonlab.tasks.arm_lift import make_arm_lift_cfg
from batonlab.tasks.grasping import privilege_schedule, teacher_agent_cfg, tool_step_arm_action
from batonlab.tasks.table_scene import (FINGER_PADS, add_box_object, add_gripper_table_pairs, make_table_arm_spec,
                                        pad_contact_sensor)

BOX_HALF = (0.12, 0.08, 0.02)
"""Nominal half sizes of the flat box [m]."""

TABLE_EDGE_Y = 0.2
"""The table's left edge in this task [m, y]: the box must overhang it to be grasped."""

GRIP_KP = 1000.0
"""The gripper's position gain in this task [N/m] (arm6's default: 300): closed on the 4 cm box it squeezes
~20 N instead of ~6 N, which let boxes tilt and slip out of the edge pinch (docs/PRIVILEGES.md). The manifest
carries it, so the robot's gripper must be set to the same grip."""

PAD_CONTACTS = tuple(pad_contact_sensor(pad, "object") for pad in FINGER_PADS)
"""Contact counts of the finger pads with the box: both non-zero is a grasp."""

PUSH_GOAL_Y = TABLE_EDGE_Y - 0.02
"""The push reward is full once the box's centre is here [m, y]: 2 cm inside the edge, the nominal box
overhanging it by 6 cm (the palm clears the table when the pads pinch at least 4 cm beyond the edge)."""

HEAD_START = 0.23
"""At λ = 1 the box starts this much closer to the edge [m, y], its centre at most at `PUSH_GOAL_Y`:
from y ∈ (-0.05, 0.05) to the goal itself."""

ITERATIONS = 600
"""The teacher's training budget; λ is 0 by 60 % of it."""

IN_HAND_RADIUS = 0.15
"""The box counts as in hand within this distance of the tool point [m] (grasped by an edge, its
centre is up to its half length away) and with both finger pads on it: a first training that
counted the distance alone learned to stand the box on edge and clamp it between the arm's links."""


def make_push_grasp_spec() -> mujoco.MjSpec:
    """Arm6 on a narrower table (left edge at `TABLE_EDGE_Y`), the flat box, switchable contacts, a firmer grip."""
    spec = make_table_arm_spec()
    table = spec.geom("table")
    right = table.pos[1] - table.size[1]
    table.size = [table.size[0], (TABLE_EDGE_Y - right) / 2, table.size[2]]
    table.pos = [table.pos[0], (TABLE_EDGE_Y + right) / 2, table.pos[2]]
    add_box_object(spec, "object", BOX_HALF, mass=0.1, pos=(0.38, 0.0, BOX_HALF[2] + 0.001), friction=0.8,
                   rgba=(0.2, 0.45, 0.85, 1.0))
    add_gripper_table_pairs(spec)
    gripper = spec.actuator("gripper")
    gripper.gainprm[0], gripper.biasprm[1] = GRIP_KP, -GRIP_KP
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
                                        params={"body": "object", "goal": PUSH_GOAL_Y, "std": 0.1, "axis": 1}, weight=2.0)
    cfg.events["object"].params.update(x_range=(0.33, 0.43), y_range=(-0.05, 0.05), yaw_range=(-0.2, 0.2),
                                       size_scale=(0.9, 1.0), mass_range=(0.05, 0.15), friction_range=(0.5, 1.0))
    cfg.privileges.pop("attraction")
    cfg.rewards["reach"].params["std"] = 0.3
    cfg.rewards["pinch_pose"] = RewardTermCfg(
        func=manipulation.tool_axis_aligned_near,
        params={"quat_sensor": "ee_quat_b", "local_axis": (0.0, 1.0, 0.0), "direction": (0.0, 0.0, 1.0),
                "body": "object", "sensor": "ee_pos_w", "std": 0.3}, weight=1.0)
    cfg.observations["privileged"].terms["contacts"].params["sensors"] = PAD_CONTACTS
    cfg.expert = TermCfg(func=PushGraspExpert, params={"half_size": BOX_HALF, "edge_y": TABLE_EDGE_Y, "push_to": PUSH_GOAL_Y,
                                                       "in_hand_radius": IN_HAND_RADIUS})
    cfg.privileges["head_start"] = PrivilegeTermCfg(
        func=HeadStart, params={"body": "object", "shift": (0.0, HEAD_START), "max_xy": (None, PUSH_GOAL_Y)})
    cfg.privileges["slippery_table"] = PrivilegeTermCfg(
        func=RelaxedContacts, params={"pairs": ("object_table",), "threshold": 0.25, "mode": "soften",
                                      "friction_scale": 0.2, "timeconst_scale": 1.0})
    return cfg


def make_arm_push_grasp_tool_cfg(play: bool = False) -> TaskCfg:
    """`arm_push_grasp` with the arm driven by tool steps: the scripted expert's labels are its Cartesian steps, which
    a student learns where it did not learn the joint targets (docs/PRIVILEGES.md)."""
    cfg = make_arm_push_grasp_cfg(play)
    cfg.actions["arm"] = tool_step_arm_action()
    return cfg


def make_arm_push_grasp_agent_cfg() -> RunnerCfg:
    return teacher_agent_cfg("arm_push_grasp", max_iterations=ITERATIONS, gamma=0.99)


def make_arm_push_grasp_tool_agent_cfg() -> RunnerCfg:
    return teacher_agent_cfg("arm_push_grasp_tool", max_iterations=ITERATIONS, gamma=0.99)


register("arm_push_grasp", make_arm_push_grasp_cfg, make_arm_push_grasp_agent_cfg,
         "table-mounted arm6 pushes a flat box over the table edge, grasps and lifts it")
register("arm_push_grasp_tool", make_arm_push_grasp_tool_cfg, make_arm_push_grasp_tool_agent_cfg,
         "arm_push_grasp with arm actions as tool steps (students of its scripted expert: teacher=expert)")
