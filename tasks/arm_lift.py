# SPDX-License-Identifier: BSD-3-Clause
"""`arm_lift`: the table-mounted arm6 grasps a cube and lifts it 10 cm above the table.

One parsimonious reward: reach the cube, lift it in hand (progress toward 10 cm), and a success bonus
(the cube 10 cm up and within 6 cm of the tool point: a thrown cube does not count). The
cube's size, mass, friction, position and heading are drawn per episode. While privileged (λ > 0) a
virtual force pulls the cube toward the tool point and carries its weight while both fingertips
touch it, and the gripper passes through the table; `PrivilegeSchedule` lowers λ as the policy
succeeds. `play` and `export` run at λ = 0.

Observation groups:
- `policy` (deployable): arm and gripper joints, the tool point, the object pose as a perception
  node would report it (`sensors/object_pose`: noisy, 0-2 control steps late in training), the last action;
- `privileged` (simulation only): the exact object position and velocity, its mass, friction and
  size, the fingertip contact flags, λ.
The default agent is the teacher: its actor and critic read both groups. Distil a deployable
student with `agent.algorithm.class_name=Distillation teacher=RUN_DIR`.
"""

from __future__ import annotations

from batonlab import events, observations
from batonlab.env.cfg import (EventTermCfg, ObsGroupCfg, ObsTermCfg, PrivilegeTermCfg, RewardTermCfg, SceneCfg, TaskCfg, TermCfg, TerminationTermCfg)
from batonlab.privileges import AttractionForce, RelaxedContacts
from batonlab.rewards import manipulation, regularizers
from batonlab.rl.cfg import RunnerCfg
from batonlab.robots.arm6 import home_pose
from batonlab.tasks import register
from batonlab.tasks.grasping import JOINTS, arm_policy_terms, grasping_task_cfg, initial_arm_pose, teacher_agent_cfg
from batonlab.tasks.table_scene import add_box_object, add_gripper_table_pairs, make_table_arm_spec

LIFT_HEIGHT = 0.10
"""Lift above the resting height that counts as success [m]."""

IN_HAND_RADIUS = 0.06
"""The cube counts as in hand within this distance of the tool point [m] (a lift counts only in hand)."""

CUBE_HALF = 0.025
"""Nominal half edge of the cube [m] (drawn between 80 % and 100 % of it)."""

FINGERTIP_TOUCH = ("finger_left_touch", "finger_right_touch")
"""arm6's fingertip touch sensors."""

ITERATIONS = 700
"""The teacher's training budget (512 envs: 8.6M env steps, ~8 min on 2 CPU cores); λ is 0 by 60 % of it."""


def make_lift_spec():
    """Arm6 on the table, a cube in front of it, gripper–table contacts switchable."""
    spec = make_table_arm_spec()
    add_box_object(spec, "object", (CUBE_HALF,) * 3, mass=0.15, pos=(0.45, 0.0, CUBE_HALF + 0.001))
    add_gripper_table_pairs(spec)
    return spec


def object_observations(joints: tuple[str, ...], play: bool = False) -> dict[str, ObsGroupCfg]:
    """The deployable `policy` group and the simulator-only `privileged` group of the object tasks
    (`play`: no noise, no delay, as on the robot's side of the export parity)."""
    return {
        "policy": ObsGroupCfg(
            terms={
                **arm_policy_terms(joints),
                "object_pose": ObsTermCfg(
                    func=observations.sensor_pose,
                    params={"name": "object_pose", "position": "object_pos", "orientation": "object_quat"},
                    noise_std=0.005, delay_range_steps=(0, 2)),
                "last_action": ObsTermCfg(func=observations.last_action),
            },
            enable_corruption=not play,
        ),
        "privileged": ObsGroupCfg(
            terms={
                "object_pos": ObsTermCfg(func=observations.body_pos, params={"body": "object"}),
                "object_vel": ObsTermCfg(func=observations.body_lin_vel, params={"body": "object"}, scale=0.5),
                "ee_to_object": ObsTermCfg(func=observations.ee_to_body, params={"body": "object", "sensor": "ee_pos_w"}),
                "object_physics": ObsTermCfg(func=observations.object_physics, params={"event": "object"}),
                "contacts": ObsTermCfg(func=observations.touch_flags, params={"sensors": FINGERTIP_TOUCH}),
                "privilege_level": ObsTermCfg(func=observations.privilege_level),
            },
            privileged=True,
        ),
    }


def make_arm_lift_cfg(play: bool = False) -> TaskCfg:
    lift = {"body": "object", "event": "object", "height": LIFT_HEIGHT, "sensor": "ee_pos_w", "radius": IN_HAND_RADIUS}
    return grasping_task_cfg(
        play,
        ITERATIONS,
        scene=SceneCfg(build=make_lift_spec, default_joint_pos=home_pose(), camera="overview"),
        episode_length_s=4.0,
        observations=object_observations(JOINTS, play),
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
                func=events.RandomizeObject, mode="reset",
                params={"body": "object", "x_range": (0.35, 0.55), "y_range": (-0.15, 0.15), "yaw_range": (-0.6, 0.6),
                        "size_scale": (0.8, 1.0), "mass_range": (0.05, 0.3), "friction_range": (0.6, 1.2)}),
            "initial_pose": initial_arm_pose((-0.15, 0.15)),
        },
        privileges={
            "attraction": PrivilegeTermCfg(
                func=AttractionForce,
                params={"body": "object", "site_sensor": "ee_pos_w", "kp": 150.0, "kd": 3.0, "max_force": 6.0, "lift_fraction": 1.0,
                        "touch_sensors": FINGERTIP_TOUCH, "radius": 0.08}),
            "gripper_through_table": PrivilegeTermCfg(
                func=RelaxedContacts,
                params={"pairs": ("finger_left_pad_table", "finger_right_pad_table", "palm_collision_table"),
                        "threshold": 0.5, "mode": "disable"}),
        },
        success=TermCfg(func=manipulation.object_lifted, params=lift),
        progress=TermCfg(func=manipulation.LiftProgress, params={"body": "object", "event": "object", "sensor": "ee_pos_w",
                                                                   "height": LIFT_HEIGHT, "distance_scale": 0.5}),
    )


def make_arm_lift_agent_cfg() -> RunnerCfg:
    return teacher_agent_cfg("arm_lift", max_iterations=ITERATIONS, gamma=0.98)


register("arm_lift", make_arm_lift_cfg, make_arm_lift_agent_cfg, "table-mounted arm6 grasps a cube and lifts it 10 cm")
