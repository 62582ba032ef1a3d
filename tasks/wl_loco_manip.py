# SPDX-License-Identifier: BSD-3-Clause
"""`wl_loco_manip`: one whole-body policy drives the wheel-legged robot's legs, wheels and arm: the
base tracks a forward speed and yaw rate while the gripper reaches a moving target.

This is the arm-constrained loco-manipulation method the project was started from: trained with
P3O under three constraint costs (arm torque, end-effector workspace, forbidden contacts) and
three curricula (the end-effector workspace widens from the stowed pose as the arm tracks well;
base and arm reward weights follow their normalised performance; cost limits start loose and
tighten). Without them the arm tends to freeze near its stowed pose, because every arm motion
disturbs the balancing base and the base rewards are learned first.

Commands: `base_velocity` (forward speed, yaw rate; height fixed at nominal) and `ee_target`, a
point in the arm base frame (`EndEffectorTargetCommand`: drawn in spherical coordinates around the
shoulder, clear of the body and the ground, gliding to each new draw over 1 s). On the robot the
target arrives on `commands/ee_target` (`geometry_msgs/PointStamped`, arm base frame; in `wl_loco_manip_pose` a
`geometry_msgs/PoseStamped` with the tool orientation).

Variants and tuning from the command line, e.g.
    batonlab train task=wl_loco_manip agent.algorithm.class_name=PPO '~env.curriculum.arm_workspace'
    batonlab train task=wl_loco_manip env.only_positive_rewards=true env.costs.arm_torque.limit=0.02

The defaults, and what they reach over seeds with `bench/loco_manip.py`, are measured in `docs/LOCO_MANIP.md`.
"""

from __future__ import annotations

import mujoco
import torch

from batonlab import events, observations, terminations
from batonlab.actions import IKResidualAction, JointPositionAction
from batonlab.commands import EndEffectorPoseCommand, EndEffectorTargetCommand
from batonlab.curricula.arm_workspace import ArmWorkspaceCurriculum
from batonlab.curricula.cost_limits import CostLimitSchedule
from batonlab.curricula.reward_balance import RewardBalanceCurriculum
from batonlab.env.cfg import (ActionTermCfg, CommandTermCfg, CostTermCfg, CurriculumTermCfg, EventTermCfg, ObsTermCfg,
                              RewardTermCfg, TaskCfg, TermCfg)
from batonlab.rewards import constraints, locomotion, regularizers, tracking
from batonlab.rl.cfg import RunnerCfg
from batonlab.robots import wheel_legged as wl
from batonlab.robots.arm6 import ARM_JOINTS, EE_SITE, GRIPPER_JOINT
from batonlab.tasks import register
from batonlab.tasks.mobile_robot import COMMAND
from batonlab.tasks.wl_balance import make_wl_balance_agent_cfg, make_wl_balance_cfg, make_wl_scene_spec

EE_COMMAND = "ee_target"
EE_SENSOR = "ee_pos_b"
"""Tool-centre point in the arm base frame, the frame of `ee_target`."""

TARGET_LIMITS = {"radius": (0.12, 0.55), "pitch": (-0.7, 1.0), "yaw": (-1.3, 1.3)}
"""Widest end-effector target ranges around the shoulder [m, rad, rad] (the curriculum's limits)."""

TARGET_START_SPAN = {"radius": 0.03, "pitch": 0.1, "yaw": 0.1}
"""Half-widths of the first target ranges around the stowed pose [m, rad, rad]."""

SHELL_RADIUS = (0.10, 0.60)
"""The end-effector's allowed distance from the shoulder [m] (reach 0.65 m): the workspace constraint."""

KEEP_OUT_BOX_B = ((-0.25, 0.23), (-0.25, 0.25), (-1.0, 0.06))
"""Targets never fall in this box of the arm base frame: the torso (its top is 0.07 m below the
mount), legs and wheels with about 6 cm of margin [m]."""

MIN_TARGET_Z = -0.38
"""Lowest target in the arm base frame: 0.08 m above the ground at the nominal stance [m]."""

ARM_ACTION_SCALE = 0.5
"""Arm position target per unit action [rad]. Reaching across the workspace takes about 1 rad per
joint, so a smaller scale needs actions far outside the initial action distribution; the initial
exploration noise is kept low instead (`init_noise_std` 0.5: at 0.8 the noise alone drives the
shoulder servo, kp 160, past its torque limit on most steps)."""

IK_DAMPING = 0.05
"""Damped least-squares damping of the IK-residual arm [m] (the seed method's value)."""

IK_RESIDUAL_SCALE = 0.25
"""Residual joint offset per unit action on top of the IK step [rad] (a first value, not tuned yet)."""

IK_ORIENTATION_WEIGHT = 0.3
"""Metres per radian of tool orientation error in the pose task's IK step (0.3 over 0.1: docs/LOCO_MANIP.md)."""

EE_QUAT_SENSOR = "ee_quat_b"
"""Tool orientation in the arm base frame (w, x, y, z)."""

EE_POSE = "ee_pose_b"
"""The tool pose the pose task's policy reads (`sensor_pose` of `ee_pos_b` and `ee_quat_b`; on the robot
`sensors/ee_pose_b`, geometry_msgs/PoseStamped)."""

TOOL_TILT_RANGE = (-0.4, 0.4)
TOOL_ROLL_RANGE = (-0.5, 0.5)
"""The pose task's orientation draws around the stowed tool turned to face the target [rad]."""

ORIENT_FINE_STD = 0.15
"""Kernel width of the pose task's fine orientation reward, next to `ee_orient`'s 0.4 rad [rad]."""

SUCCESS_MAX_ORIENT_ERROR = 0.3
"""The pose task's success also needs the episode's mean tool orientation error below this [rad]."""

TORQUE_FRACTION = 0.8
"""Share of an arm motor's torque limit that counts as over-torque [-]."""

ARM_CONTACT_SENSORS = ("arm_torso_contact", "arm_left_leg_contact", "arm_right_leg_contact")

COST_LIMITS_START = {"arm_torque": 0.2, "ee_workspace": 0.1, "link_contact": 0.05}
"""Loose cost limits at the start of training, tightened to the `costs` limits by the schedule [-]."""

LIMIT_SCHEDULE_STEPS = 4800
"""Control steps over which the cost limits tighten (200 iterations of 24 steps) [-]."""

SPEED_FINE_STD = 0.1
"""Kernel width of the IK tasks' fine forward-speed reward, next to wl_balance's 0.25 m/s one [m/s]."""

SUCCESS_MAX_EE_ERROR = 0.10
"""Mean end-effector error over an episode that still counts as reaching [m]."""

DESIRED_KL = 0.02
"""KL target of the adaptive learning rate (rsl-rl's 0.01 held the step small at this initial noise) [-]."""


def make_loco_manip_scene_spec() -> mujoco.MjSpec:
    """The wheel-legged robot with arm6, able to hit itself, with the sensors the costs read.

    In the base model the arm never collides with the robot (robot and arm geoms share contype 2 /
    conaffinity 1); here arm links and the robot's torso, legs and wheels collide (bit 4), so an
    arm swung into the body is stopped and reported, as it would be on hardware. Adds torque
    sensors on the arm motors, contact sensors arm ↔ torso and arm ↔ legs, and a target marker.
    """
    spec = make_wl_scene_spec(with_arm=True)
    spec.modelname = "wl_loco_manip"
    for geom in spec.body("arm_base").find_all(mujoco.mjtObj.mjOBJ_GEOM):
        if geom.contype:
            geom.conaffinity |= 4
    for name in ("torso_collision", "left_thigh_collision", "right_thigh_collision", "left_wheel_collision",
                 "right_wheel_collision"):
        spec.geom(name).contype |= 4
    for joint in ARM_JOINTS:
        spec.add_sensor(name=f"{joint}_torque", type=mujoco.mjtSensor.mjSENS_ACTUATORFRC, objtype=mujoco.mjtObj.mjOBJ_ACTUATOR,
                        objname=joint)
    for sensor, (reftype, body) in zip(ARM_CONTACT_SENSORS, ((mujoco.mjtObj.mjOBJ_BODY, wl.BASE_BODY),
                                                           (mujoco.mjtObj.mjOBJ_XBODY, "left_thigh"),
                                                           (mujoco.mjtObj.mjOBJ_XBODY, "right_thigh"))):
        spec.add_sensor(name=sensor, type=mujoco.mjtSensor.mjSENS_CONTACT, objtype=mujoco.mjtObj.mjOBJ_XBODY,
                        objname="arm_base", reftype=reftype, refname=body, intprm=[1 | 2, 3, 1])
    marker = spec.worldbody.add_body(name="ee_target_marker", mocap=True, pos=[0, 0, -1])
    marker.add_geom(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[0.03, 0, 0], contype=0, conaffinity=0, group=1,
                    rgba=[0.1, 0.9, 0.2, 0.8])
    return spec


def make_wl_loco_manip_cfg(play: bool = False) -> TaskCfg:
    cfg = make_wl_balance_cfg(play=play, with_arm=True)
    geometry = wl.arm_geometry()
    legs, wheels, arm = wl.LEG_JOINTS, wl.WHEEL_JOINTS, ARM_JOINTS
    ee = {"command": EE_COMMAND, "sensor": EE_SENSOR}
    cfg.scene.build = make_loco_manip_scene_spec
    cfg.episode_length_s = 12.0

    # One policy, three action terms: legs (position), wheels (velocity), arm (position); the gripper is held.
    cfg.actions["arm"] = ActionTermCfg(cls=JointPositionAction, joints=arm, scale=ARM_ACTION_SCALE)
    cfg.deploy.held_joints = (GRIPPER_JOINT,)
    cfg.events["arm_stowed"].params["joints"] = cfg.deploy.held_joints
    cfg.events["reset_arm"] = EventTermCfg(
        func=events.reset_joints_uniform, mode="reset", params={"joints": arm, "position_range": (-0.1, 0.1)}
    )
    cfg.events["actuator_gains"].params["joints"] = legs + wheels + arm

    base = cfg.commands[COMMAND]
    base.resampling_time_range_s = (6.0, 10.0)
    base.params.update(lin_vel_x_range=(-1.0, 1.0), ang_vel_z_range=(-1.0, 1.0), standing_fraction=0.2)
    cfg.commands[EE_COMMAND] = CommandTermCfg(
        cls=EndEffectorTargetCommand,
        resampling_time_range_s=(2.0, 3.0),
        params={
            "radius_range": TARGET_LIMITS["radius"],
            "pitch_range": TARGET_LIMITS["pitch"],
            "yaw_range": TARGET_LIMITS["yaw"],
            "shoulder": geometry.shoulder,
            "stowed_position": geometry.stowed_ee,
            "keep_out_box": KEEP_OUT_BOX_B,
            "min_z": MIN_TARGET_Z,
            "transition_s": 1.0,
            "ee_sensor": EE_SENSOR,
            "marker_mocap": "ee_target_marker",
            "mount_offset": geometry.mount_offset,
        },
    )

    def arm_terms(noise: bool) -> dict[str, ObsTermCfg]:
        k = 1.0 if noise else 0.0
        return {
            "arm_pos": ObsTermCfg(func=observations.joint_pos_rel, params={"joints": arm}, noise_std=0.01 * k),
            "arm_vel": ObsTermCfg(func=observations.joint_vel, params={"joints": arm}, noise_std=0.5 * k, scale=0.05),
            "ee_pos": ObsTermCfg(func=observations.sensor, params={"name": EE_SENSOR}, noise_std=0.005 * k),
            "ee_target": ObsTermCfg(func=observations.generated_command, params={"command": EE_COMMAND}),
        }

    for group, noise in (("policy", True), ("critic", False)):
        terms = cfg.observations[group].terms
        last_action = terms.pop("last_action")
        terms.update(arm_terms(noise))
        terms["last_action"] = last_action  # keep the action history last, after every state term

    cfg.rewards["track_lin_vel_x"].weight = 1.5
    cfg.rewards["track_ang_vel_z"].params["std"] = 0.4
    cfg.rewards["track_ang_vel_z"].weight = 0.75
    cfg.rewards["track_height"].weight = 0.5
    cfg.rewards["leg_mirror"].weight = -0.5
    cfg.rewards["ee_track"] = RewardTermCfg(func=tracking.position_command_error_tanh, params={**ee, "std": 0.2}, weight=2.5)
    cfg.rewards["ee_track_fine"] = RewardTermCfg(func=tracking.position_command_error_exp, params={**ee, "std": 0.05},
                                                 weight=1.5)
    cfg.rewards["arm_joint_vel"] = RewardTermCfg(func=regularizers.joint_vel_l2, params={"joints": arm}, weight=-0.002)

    # Costs (indicators; limits are allowed fractions of steps in violation).
    cfg.costs = {
        "arm_torque": CostTermCfg(func=constraints.ActuatorForceOverLimit,
                                  params={"joints": arm, "fraction": TORQUE_FRACTION}, limit=0.01),
        "ee_workspace": CostTermCfg(func=constraints.position_outside_shell,
                                    params={"sensor": EE_SENSOR, "center": geometry.shoulder,
                                            "min_radius": SHELL_RADIUS[0], "max_radius": SHELL_RADIUS[1]}, limit=0.01),
        "link_contact": CostTermCfg(func=constraints.any_contact,
                                    params={"sensors": (*ARM_CONTACT_SENSORS, wl.ARM_GROUND_CONTACT_SENSOR,
                                                        *wl.GROUND_CONTACT_SENSORS)}, limit=0.005),
    }
    # The arm touching the ground is a constraint here, not a fall (the torso and thighs still are).
    cfg.terminations["illegal_contact"].params["sensors"] = wl.GROUND_CONTACT_SENSORS

    cfg.curriculum = {
        # The arm-constrained target curriculum: targets start around the stowed tool point and the
        # workspace widens while the arm tracks (score = tracking reward / its maximum), narrowing
        # again if tracking collapses. Decisions every 2 s of simulated time, not every episode:
        # the arm learns far faster than a 12 s episode.
        "arm_workspace": CurriculumTermCfg(func=ArmWorkspaceCurriculum, params={
            "command": EE_COMMAND, "reward_terms": ["ee_track", "ee_track_fine"], "limits": TARGET_LIMITS,
            "start_span": TARGET_START_SPAN, "step": {"radius": 0.03, "pitch": 0.1, "yaw": 0.15},
            "fraction": 0.55, "narrow_fraction": 0.3, "interval_s": 2.0}),
        # Base and arm rewards weighted by how far each is from its maximum, so neither side is given up.
        "reward_balance": CurriculumTermCfg(func=RewardBalanceCurriculum, params={
            "groups": {"base": ["track_lin_vel_x", "track_ang_vel_z"], "arm": ["ee_track", "ee_track_fine"]},
            "interval_s": 2.0}),
        "cost_limits": CurriculumTermCfg(func=CostLimitSchedule, params={
            "start": COST_LIMITS_START, "duration_steps": LIMIT_SCHEDULE_STEPS}),
    }

    cfg.events["push"].interval_range_s = (6.0, 10.0)
    cfg.events["reset_base"].params["orientation_range"]["pitch"] = (-0.1, 0.1)
    cfg.success = TermCfg(func=ee_tracked_and_survived, params={"command": EE_COMMAND,
                                                                "max_mean_error": SUCCESS_MAX_EE_ERROR})
    if play:
        # Play tests the final task: targets over the widest ranges, no curricula (a checkpoint's
        # curriculum state is skipped when playing). The sim robot plays the same task.
        cfg.curriculum = {}
        cfg.events.pop("push", None)
    return cfg


def ee_tracked_and_survived(env, command: str, max_mean_error: float,
                            max_mean_orient_error: float | None = None) -> torch.Tensor:
    """True where the episode ran to its time limit with a mean end-effector error below `max_mean_error` [m] (and,
    when given, a mean orientation error below `max_mean_orient_error` [rad])."""
    metrics = env.command_manager.terms[command].metrics
    time = metrics["time"].clamp(min=1e-6)
    done = terminations.survived(env) & (metrics["ee_error"] / time < max_mean_error)
    if max_mean_orient_error is not None:
        done &= metrics["ee_orient_error"] / time < max_mean_orient_error
    return done


def make_wl_loco_manip_agent_cfg() -> RunnerCfg:
    """wl_balance's runner with wider networks, lower initial noise (see `ARM_ACTION_SCALE`) and P3O."""
    cfg = make_wl_balance_agent_cfg()
    cfg.experiment_name = "wl_loco_manip"
    cfg.max_iterations = 500
    cfg.policy.actor_hidden_dims = cfg.policy.critic_hidden_dims = (256, 128, 64)
    cfg.policy.init_noise_std = 0.5
    cfg.algorithm.desired_kl = DESIRED_KL
    cfg.algorithm.class_name = "P3O"
    return cfg


def make_wl_loco_manip_ik_cfg(play: bool = False) -> TaskCfg:
    """`wl_loco_manip` with the arm acting as a residual on a damped least-squares IK step toward `ee_target`
    (the seed method's arm action; the robot computes the same step from the manifest's kinematic chain)."""
    cfg = make_wl_loco_manip_cfg(play)
    arm = cfg.actions["arm"]
    cfg.actions["arm"] = ActionTermCfg(cls=IKResidualAction, joints=arm.joints, scale=IK_RESIDUAL_SCALE,
                                       params={"command": EE_COMMAND, "base": "arm_base", "site": EE_SITE,
                                               "damping": IK_DAMPING})
    fine_speed = {**cfg.rewards["track_lin_vel_x"].params, "std": SPEED_FINE_STD}
    cfg.rewards["track_lin_vel_x_fine"] = RewardTermCfg(func=locomotion.track_lin_vel_x_exp, params=fine_speed, weight=1.0)
    if "reward_balance" in cfg.curriculum:
        cfg.curriculum["reward_balance"].params["groups"]["base"].append("track_lin_vel_x_fine")
    return cfg


def make_wl_loco_manip_pose_cfg(play: bool = False) -> TaskCfg:
    """`wl_loco_manip_ik` toward a tool pose: the target carries an orientation (`EndEffectorPoseCommand`, on the
    robot `commands/ee_target` as geometry_msgs/PoseStamped), the IK step turns toward it, the policy reads the tool
    pose and is paid for the orientation too."""
    cfg = make_wl_loco_manip_ik_cfg(play)
    geometry = wl.arm_geometry()
    target = cfg.commands[EE_COMMAND]
    target.cls = EndEffectorPoseCommand
    target.params.update(stowed_quat=geometry.stowed_ee_quat, tilt_range=TOOL_TILT_RANGE, roll_range=TOOL_ROLL_RANGE,
                         ee_quat_sensor=EE_QUAT_SENSOR)
    cfg.actions["arm"].params["orientation_weight"] = IK_ORIENTATION_WEIGHT
    for group in ("policy", "critic"):
        terms = cfg.observations[group].terms
        position = terms["ee_pos"]
        terms["ee_pos"] = ObsTermCfg(func=observations.sensor_pose, noise_std=position.noise_std,
                                     params={"name": EE_POSE, "position": EE_SENSOR, "orientation": EE_QUAT_SENSOR})
    cfg.rewards["ee_orient"] = RewardTermCfg(func=tracking.orientation_command_error_exp,
                                             params={"command": EE_COMMAND, "sensor": EE_QUAT_SENSOR, "std": 0.4},
                                             weight=1.0)
    cfg.rewards["ee_orient_fine"] = RewardTermCfg(func=tracking.orientation_command_error_exp,
                                                  params={**cfg.rewards["ee_orient"].params, "std": ORIENT_FINE_STD},
                                                  weight=1.0)
    if "reward_balance" in cfg.curriculum:  # the arm's share of the weight pays for its orientation too
        cfg.curriculum["reward_balance"].params["groups"]["arm"] += ["ee_orient", "ee_orient_fine"]
    cfg.success.params["max_mean_orient_error"] = SUCCESS_MAX_ORIENT_ERROR
    return cfg


register("wl_loco_manip", make_wl_loco_manip_cfg, make_wl_loco_manip_agent_cfg,
         "wheel-legged robot with arm: one whole-body policy drives and reaches a moving target (P3O, curricula)")
register("wl_loco_manip_ik", make_wl_loco_manip_ik_cfg, make_wl_loco_manip_agent_cfg,
         "wl_loco_manip with the arm as a residual on damped least-squares IK toward the target")
register("wl_loco_manip_pose", make_wl_loco_manip_pose_cfg, make_wl_loco_manip_agent_cfg,
         "wl_loco_manip_ik toward a tool pose (position and orientation; PoseStamped on the robot)")
