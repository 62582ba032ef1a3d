# SPDX-License-Identifier: BSD-3-Clause
"""`arm_push_grasp`: a flat box lies on the table, too wide to grasp from above; the arm pushes it
until it overhangs the table's front edge (or stands it on edge), grasps it with the fingertips and lifts it 10 cm.

The box is 24 × 16 × 4 cm (randomised down to 80 %): both sides of its top exceed the gripper's
7.8 cm opening, so the only grasp is across its thickness, which needs an edge in the air: over the
table top's front edge (x = 0.55 m, within reach) or with the box pivoted up. The reward is
`arm_lift`'s (reach, lift in hand, success), with "in hand" widened to the box's half length and
requiring both fingertips on it.

Privileges (λ = 1 at the start, lowered by `PrivilegeSchedule`): a virtual force pulls the box toward
the tool point and carries its weight while both fingertips touch it; the gripper passes through
the table; the box slides on a slippery table. The published finding this task reproduces
(`bench/privileged.py`): without privileges the policy parks the gripper on the box and never lifts it.
"""

from __future__ import annotations

import mujoco

from batonlab.curricula.privilege import PrivilegeSchedule
from batonlab.env import mdp, mdp_objects
from batonlab.env.actions import JointPositionAction
from batonlab.env.cfg import (
    ActionTermCfg,
    CurriculumTermCfg,
    EventTermCfg,
    PrivilegeTermCfg,
    RewardTermCfg,
    SceneCfg,
    SimCfg,
    TaskCfg,
    TermCfg,
    TerminationTermCfg,
)
from batonlab.env.relaxed_contacts import RelaxedContacts
from batonlab.env.virtual_forces import AttractionForce
from batonlab.rewards import manipulation, regularizers
from batonlab.rl.cfg import AlgorithmCfg, PolicyCfg, RunnerCfg
from batonlab.robots.arm6 import ARM_JOINTS, GRIPPER_JOINT, home_pose
from batonlab.tasks import register
from batonlab.tasks.arm_lift import FINGERTIP_TOUCH, LIFT_HEIGHT, object_observations
from batonlab.tasks.table_scene import add_box_object, add_gripper_table_pairs, make_table_arm_spec

BOX_HALF = (0.12, 0.08, 0.02)
"""Nominal half sizes of the flat box [m]."""

TABLE_EDGE_X = 0.55
"""The table's front edge in this task [m]: the box must overhang it to be grasped."""

IN_HAND_RADIUS = 0.15
"""The box counts as in hand within this distance of the tool point [m] (grasped by an edge, its
centre is up to its half length away) and with both fingertips touching: a first training that
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
    joints = (*ARM_JOINTS, GRIPPER_JOINT)
    lift = {"body": "object", "event": "object", "height": LIFT_HEIGHT, "sensor": "ee_pos_w", "radius": IN_HAND_RADIUS,
            "touch_sensors": FINGERTIP_TOUCH}
    cfg = TaskCfg(
        scene=SceneCfg(build=make_push_grasp_spec, default_joint_pos=home_pose(), camera="overview"),
        sim=SimCfg(physics_dt=0.005, decimation=4),
        num_envs=1024,
        episode_length_s=6.0,
        actions={
            "arm": ActionTermCfg(cls=JointPositionAction, joints=ARM_JOINTS, scale=0.5),
            "gripper": ActionTermCfg(cls=JointPositionAction, joints=(GRIPPER_JOINT,), scale=0.02),
        },
        observations=object_observations(joints, play),
        rewards={
            "reach": RewardTermCfg(func=manipulation.reach_object_tanh,
                                   params={"body": "object", "sensor": "ee_pos_w", "std": 0.1}, weight=1.0),
            "lift": RewardTermCfg(func=manipulation.lift_progress, params=lift, weight=8.0),
            "lifted": RewardTermCfg(func=manipulation.object_lifted, params=lift, weight=8.0),
            "action_rate": RewardTermCfg(func=regularizers.action_rate_l2, weight=-0.01),
        },
        terminations={
            "object_dropped": TerminationTermCfg(func=manipulation.object_below, params={"body": "object", "z": -0.1}),
        },
        events={
            "object": EventTermCfg(
                func=mdp_objects.RandomizeObject, mode="reset",
                params={"body": "object", "x_range": (0.3, 0.4), "y_range": (-0.1, 0.1), "yaw_range": (-0.3, 0.3),
                        "size_scale": (0.8, 1.0), "mass_range": (0.1, 0.3), "friction_range": (0.5, 1.0)}),
            "initial_pose": EventTermCfg(func=mdp.reset_joints_uniform, mode="reset",
                                         params={"joints": ARM_JOINTS, "position_range": (-0.15, 0.15)}),
        },
        privileges={
            "attraction": PrivilegeTermCfg(
                func=AttractionForce,
                params={"body": "object", "site_sensor": "ee_pos_w", "kp": 150.0, "kd": 3.0, "max_force": 6.0,
                        "lift_fraction": 1.0, "touch_sensors": FINGERTIP_TOUCH, "radius": 0.08}),
            "gripper_through_table": PrivilegeTermCfg(
                func=RelaxedContacts,
                params={"pairs": ("finger_left_pad_table", "finger_right_pad_table", "palm_collision_table"),
                        "threshold": 0.5, "mode": "disable"}),
            "slippery_table": PrivilegeTermCfg(
                func=RelaxedContacts, params={"pairs": ("object_table",), "threshold": 0.25, "mode": "soften",
                                              "friction_scale": 0.2, "timeconst_scale": 1.0}),
        },
        privilege_level=1.0,
        curriculum={
            "privilege": CurriculumTermCfg(func=PrivilegeSchedule, params={"success_threshold": 0.75, "window_episodes": 1024}),
        },
        success=TermCfg(func=manipulation.object_lifted, params=lift),
    )
    if play:
        cfg.num_envs = 16
        cfg.privilege_level = 0.0
        cfg.curriculum = {}
    return cfg


def make_arm_push_grasp_agent_cfg() -> RunnerCfg:
    return RunnerCfg(
        experiment_name="arm_push_grasp",
        num_steps_per_env=24,
        max_iterations=600,
        save_interval=100,
        obs_groups={"actor": ["policy", "privileged"], "critic": ["policy", "privileged"]},
        policy=PolicyCfg(actor_hidden_dims=(256, 128, 64), critic_hidden_dims=(256, 128, 64), init_noise_std=1.0),
        algorithm=AlgorithmCfg(learning_rate=1e-3, entropy_coef=0.005, num_mini_batches=4, gamma=0.99),
    )


register("arm_push_grasp", make_arm_push_grasp_cfg, make_arm_push_grasp_agent_cfg,
         "table-mounted arm6 pushes a flat box over the table edge, grasps and lifts it")
