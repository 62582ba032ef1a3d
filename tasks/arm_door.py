# SPDX-License-Identifier: BSD-3-Clause
"""`arm_door`: the table-mounted arm6 opens a latched, spring-loaded door by its lever handle past 60°.

The door (`assets/door`, 0.35 × 0.45 m, on the table 0.58 m in front of the arm, facing it) opens
toward the arm: the handle must be pressed down past ~0.5 rad to retract the latch bolt, then pulled
along an arc against the closing spring. One parsimonious reward: reach the handle, opening progress
toward 60°, and a success bonus. The door's pose, width, panel mass, spring stiffness, hinge damping
and friction, and the handle's friction and spring are drawn per episode. While privileged (λ > 0),
a torque about the hinge opens the door while the tool point is at the handle (`HingeAssist`), and
above λ = 0.5 the latch is off (its bolt–strike pair disabled); `PrivilegeSchedule` lowers λ as the
policy succeeds. `play` and `export` run at λ = 0.

Observation groups:
- `policy` (deployable): arm and gripper joints, the tool point, the handle position in the arm base
  frame (`sensors/door_handle_pos_b`, as a perception node would report it: noisy, 0-2 control steps
  late in training), the door and handle angles (`sensors/door_angle`, `sensors/door_handle_angle`:
  encoders on a test door, or a perception estimate of the panel and lever on a real one; noisy and
  late likewise), the last action. The handle position is needed because the door's pose varies;
  the angles tell the policy whether the latch can have released and how far the door is open,
  which the handle position alone gives only through the unknown door pose and width;
- `privileged` (simulation only): the exact door state (hinge, handle, bolt positions and
  velocities), the tool point to handle vector, everything the randomisation drew, whether the latch
  is off, λ.
The default agent is the teacher: its actor and critic read both groups. Distil a deployable
student with `agent.algorithm.class_name=Distillation teacher=RUN_DIR`.
"""

from __future__ import annotations

from batonlab import events, observations
from batonlab.env.cfg import (EventTermCfg, ObsGroupCfg, ObsTermCfg, PrivilegeTermCfg, RewardTermCfg, SceneCfg, TaskCfg, TermCfg)
from batonlab.privileges import HingeAssist, RelaxedContacts
from batonlab.rewards import door, regularizers
from batonlab.rl.cfg import RunnerCfg
from batonlab.robots import door as door_asset
from batonlab.robots.arm6 import home_pose
from batonlab.tasks import register
from batonlab.tasks.grasping import JOINTS, arm_policy_terms, grasping_task_cfg, initial_arm_pose, teacher_agent_cfg
from batonlab.tasks.table_scene import add_look_at_camera, make_table_arm_spec

OPEN_ANGLE = 1.047
"""Door angle that counts as open (60°) [rad]."""

DOOR_POS = (0.58, 0.0, 0.0)
"""Nominal origin of the door (bottom centre of its opening) on the table [m, arm base frame]; the
door faces the arm (turned by π), its hinge at y = -0.175, its handle at ~(0.52, 0.065, 0.25)."""

ITERATIONS = 300
"""The teacher's training budget; λ is 0 by 60 % of it."""

LATCH_THRESHOLD = 0.5
"""The latch is off in envs that reset while λ is above this."""


def make_door_spec():
    """Arm6 on the table, the door in front of it facing the arm, and a camera on both."""
    spec = make_table_arm_spec()
    spec.delete(spec.body("target"))  # arm_reach's target marker; nothing to point at here
    mount = door_asset.add_door_mount(spec, pos=DOOR_POS, quat=(0.0, 0.0, 0.0, 1.0))  # movable per world
    door_asset.attach_door(spec, mount, latch=True, base_site="arm_base_site")
    add_look_at_camera(spec, "door_view", eye=(0.15, -1.0, 0.75), look=(0.45, 0.0, 0.22))
    return spec


def door_observations(joints: tuple[str, ...], play: bool = False) -> dict[str, ObsGroupCfg]:
    """The deployable `policy` group (noisy and late in training, clean in `play`) and the
    simulator-only `privileged` group of the door tasks."""
    door_joints = door_asset.DOOR_JOINTS
    return {
        "policy": ObsGroupCfg(
            terms={
                **arm_policy_terms(joints),
                "handle_pos": ObsTermCfg(func=observations.sensor, params={"name": door_asset.HANDLE_POS_B_SENSOR},
                                         noise_std=0.005, delay_range_steps=(0, 2)),
                "door_angle": ObsTermCfg(func=observations.sensor, params={"name": door_asset.ANGLE_SENSOR},
                                         noise_std=0.02, delay_range_steps=(0, 2)),
                "handle_angle": ObsTermCfg(func=observations.sensor, params={"name": door_asset.HANDLE_ANGLE_SENSOR},
                                           noise_std=0.02, delay_range_steps=(0, 2)),
                "last_action": ObsTermCfg(func=observations.last_action),
            },
            enable_corruption=not play,
        ),
        "privileged": ObsGroupCfg(
            terms={
                "door_joint_pos": ObsTermCfg(func=observations.joint_pos_rel, params={"joints": door_joints}),
                "door_joint_vel": ObsTermCfg(func=observations.joint_vel, params={"joints": door_joints}, scale=0.2),
                "ee_to_handle": ObsTermCfg(func=observations.sensor_offset,
                                           params={"target": door_asset.HANDLE_POS_W_SENSOR, "origin": "ee_pos_w"}),
                "door_physics": ObsTermCfg(func=observations.door_physics, params={"event": "door"}),
                "latch_off": ObsTermCfg(func=observations.contacts_relaxed, params={"privilege": "latch_off"}),
                "privilege_level": ObsTermCfg(func=observations.privilege_level),
            },
            privileged=True,
        ),
    }


def make_arm_door_cfg(play: bool = False) -> TaskCfg:
    opened = {"joint": door_asset.HINGE_JOINT, "angle": OPEN_ANGLE}
    return grasping_task_cfg(
        play,
        ITERATIONS,
        scene=SceneCfg(build=make_door_spec, default_joint_pos=home_pose(), camera="door_view"),
        episode_length_s=6.0,
        observations=door_observations(JOINTS, play),
        rewards={
            "reach": RewardTermCfg(func=door.reach_handle_tanh,
                                   params={"handle_sensor": door_asset.HANDLE_POS_W_SENSOR, "ee_sensor": "ee_pos_w", "std": 0.1},
                                   weight=1.0),
            "open": RewardTermCfg(func=door.door_open_progress, params=opened, weight=8.0),
            "opened": RewardTermCfg(func=door.door_opened, params=opened, weight=8.0),
            "action_rate": RewardTermCfg(func=regularizers.action_rate_l2, weight=-0.01),
        },
        events={
            "door": EventTermCfg(
                func=events.RandomizeDoor, mode="reset",
                params={"x_range": (-0.03, 0.03), "y_range": (-0.05, 0.05), "yaw_range": (-0.2, 0.2),
                        "width_scale": (0.85, 1.0), "mass_range": (0.8, 2.5), "stiffness_scale": (0.5, 1.5),
                        "damping_scale": (0.5, 2.0), "friction_scale": (0.5, 2.0), "handle_friction_range": (0.5, 1.2),
                        "handle_stiffness_scale": (0.7, 1.3)}),
            "initial_pose": initial_arm_pose((-0.1, 0.1)),
        },
        privileges={
            "hinge_assist": PrivilegeTermCfg(
                func=HingeAssist,
                params={"body": door_asset.PANEL_BODY, "hinge_joint": door_asset.HINGE_JOINT,
                        "axis_sensor": door_asset.HINGE_AXIS_SENSOR, "handle_sensor": door_asset.HANDLE_POS_W_SENSOR,
                        "ee_sensor": "ee_pos_w", "max_torque": 2.5, "kp": 5.0, "target": 1.4, "radius": 0.06}),
            "latch_off": PrivilegeTermCfg(
                func=RelaxedContacts,
                params={"pairs": (door_asset.LATCH_PAIR,), "threshold": LATCH_THRESHOLD, "mode": "disable"}),
        },
        success=TermCfg(func=door.door_opened, params=opened),
    )


def make_arm_door_agent_cfg() -> RunnerCfg:
    # A longer sequence than arm_lift (reach, turn, pull for seconds): a longer horizon.
    return teacher_agent_cfg("arm_door", max_iterations=ITERATIONS, gamma=0.99)


register("arm_door", make_arm_door_cfg, make_arm_door_agent_cfg,
         "table-mounted arm6 opens a latched door by its lever handle past 60°")
