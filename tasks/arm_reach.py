# SPDX-License-Identifier: BSD-3-Clause
"""`arm_reach`: the table-mounted arm6 brings its tool-centre point to a commanded position.

The target is drawn in the arm's base frame every 2 s (twice per 4 s episode); an episode succeeds
when the tool-centre point ends within 3 cm of the target. Joint damping and friction are
randomised per world, and each episode starts from a randomised pose.
"""

from __future__ import annotations

import mujoco

from batonlab import events, observations
from batonlab.actions import JointPositionAction
from batonlab.commands import UniformPositionCommand
from batonlab.env.cfg import (ActionTermCfg, CommandTermCfg, EventTermCfg, ObsGroupCfg, ObsTermCfg, RewardTermCfg,
                              SceneCfg, SimCfg, TaskCfg, TermCfg)
from batonlab.rewards import learned, progress, regularizers, sparse, tracking
from batonlab.rl.cfg import RunnerCfg
from batonlab.robots.arm6 import ARM_JOINTS, home_pose
from batonlab.tasks import SuccessBar, register
from batonlab.tasks.agents import ppo_agent_cfg, variant_agent_cfg
from batonlab.tasks.table_scene import make_table_arm_spec

TARGET_BOX_B = {"x_range": (0.25, 0.55), "y_range": (-0.3, 0.3), "z_range": (0.10, 0.45)}
"""Where targets are drawn, in the arm base frame [m]."""

SUCCESS_THRESHOLD = 0.03
"""Tool-centre point to target distance that counts as reached [m]."""

TOOL_CAMERA_OFFSET = (0.0, 0.0, 0.095)
"""Where the tool camera sits in the frame of arm6's gripper link [m]: on the tool's axis, 1.5 cm behind
the tool-centre point (at 0.11). Its distance to the target is the tool's within ±1.5 cm, and it stays
outside the progress marker (a camera inside a sphere sees nothing). The picture's summed brightness
ranks held-out policy frames against the tool's distance at 0.92-0.95 (two sets of 32 episodes); 3 cm
behind with the 2 cm marker, 0.85-0.91; at the wrist (11 cm behind), 0.69 (pixel area): there the
tool's tilt changed the camera's distance as much as the last 10 cm of a reach did."""

TOOL_CAMERA_FOVY = 60.0
"""The marker fills most of the picture when reached (5 mm at 1.5 cm: ±19° of ±30°) and still covers a
pixel at the far side of the target box [deg]."""

NEAR_CLIP = 0.002
"""Near clipping plane over the model's extent (1.8 m): 4 mm; MuJoCo's default (0.01: 18 mm) cut a
hole into the marker as the tool camera closed in on it."""

PROGRESS_MARKER_RADIUS = 0.005
"""Radius of the target's progress marker [m]: small enough that the camera 1.5 cm behind the tool
stays outside it when the tool is at the target, so the picture keeps growing to the end of a reach."""

PROGRESS_MARKER_GROUP = 5
"""The progress marker's geom group: the only group the progress camera draws. MuJoCo's default
renderer draws 0-2, so videos show the 2 cm target marker (group 0) and not this one; arm6 keeps its
collision geoms in 3 and robot descriptions their sites in 4."""


def make_arm_reach_spec():
    """The table scene with a progress marker on the target and a `tool_view` camera (`add_goal_camera`)."""
    spec = make_table_arm_spec()
    spec.body("target").add_geom(name="progress_marker", type=mujoco.mjtGeom.mjGEOM_SPHERE,
                                 size=[PROGRESS_MARKER_RADIUS, 0, 0], group=PROGRESS_MARKER_GROUP,
                                 contype=0, conaffinity=0, rgba=[0.1, 0.9, 0.2, 1.0])
    add_goal_camera(spec, "tool_view", mount="gripper_link", goal="target")
    spec.visual.map.znear = NEAR_CLIP
    return spec


def add_goal_camera(spec, name: str, mount: str, goal: str, offset=TOOL_CAMERA_OFFSET, fovy: float = TOOL_CAMERA_FOVY) -> None:
    """A camera carried by body `mount` that always looks at body `goal` (MuJoCo's `targetbody` mode).

    Why: a progress reward matches frames to ONE demonstration, and the demo reaches one goal. Carried
    by the tool and looking at the target, with only the target's marker drawn
    (`SceneCfg.progress_geom_groups`), the picture is the marker in the middle, as large as the tool
    is near: frames of different goals at the same distance look alike, and the arm's pose (different
    for every goal) is not in them. Measured on 32 held-out policy episodes (64 px, Spearman of the
    estimate against 1 - d(t)/d(0) pooled, per episode, and against -d pooled), encoder trained on
    arm_reach rollouts with each episode alone (`SceneCfg.progress_align_episodes`), 8 seeds:
    0.85-0.86 pooled, 0.89-0.91 per episode, 0.90-0.93 against d. The camera 3 cm behind the tool
    with the 2 cm marker: 0.55-0.75 pooled and 0.79-0.91 per episode (12 episodes, 3 seeds); the
    earlier camera on the shoulder a metre to the side, arm drawn: 0.65 pooled, 0.51 per episode.
    """
    camera = spec.body(mount).add_camera(name=name, pos=list(offset), fovy=fovy)
    camera.mode = mujoco.mjtCamLight.mjCAMLIGHT_TARGETBODY
    camera.targetbody = goal


def make_arm_reach_cfg(play: bool = False) -> TaskCfg:
    joints = ARM_JOINTS
    ee_cmd = {"command": "ee_target", "sensor": "ee_pos_b"}
    cfg = TaskCfg(
        scene=SceneCfg(build=make_arm_reach_spec, default_joint_pos=home_pose(), camera="overview",
                       progress_camera="tool_view", progress_geom_groups=(PROGRESS_MARKER_GROUP,),
                       progress_align_episodes=False),
        sim=SimCfg(physics_dt=0.005, decimation=4),
        num_envs=1024,
        episode_length_s=4.0,
        actions={"arm": ActionTermCfg(cls=JointPositionAction, joints=joints, scale=0.5)},
        commands={
            "ee_target": CommandTermCfg(
                cls=UniformPositionCommand,
                resampling_time_range_s=(2.0, 2.0),
                params={**TARGET_BOX_B, "marker_mocap": "target"},
            )
        },
        observations={
            "policy": ObsGroupCfg(
                terms={
                    "joint_pos": ObsTermCfg(func=observations.joint_pos_rel, params={"joints": joints}, noise_std=0.01),
                    "joint_vel": ObsTermCfg(func=observations.joint_vel, params={"joints": joints}, noise_std=0.05, scale=0.1),
                    "ee_pos": ObsTermCfg(func=observations.sensor, params={"name": "ee_pos_b"}, noise_std=0.005),
                    "ee_target": ObsTermCfg(func=observations.generated_command, params={"command": "ee_target"}),
                    "last_action": ObsTermCfg(func=observations.last_action),
                },
                enable_corruption=not play,
            )
        },
        rewards={
            "ee_error": RewardTermCfg(func=tracking.position_command_error, params=ee_cmd, weight=-0.5),
            "ee_near": RewardTermCfg(func=tracking.position_command_error_tanh, params={**ee_cmd, "std": 0.1}, weight=1.0),
            "ee_precise": RewardTermCfg(func=tracking.position_command_error_exp, params={**ee_cmd, "std": 0.03}, weight=1.0),
            "action_rate": RewardTermCfg(func=regularizers.action_rate_l2, weight=-0.01),
            "joint_vel": RewardTermCfg(func=regularizers.joint_vel_l2, params={"joints": joints}, weight=-0.001),
        },
        events={
            "joint_params": EventTermCfg(
                func=events.randomize_joint_parameters,
                mode="startup",
                params={"joints": joints, "damping_range": (0.5, 2.0), "friction_range": (0.5, 2.0)},
            ),
            "initial_pose": EventTermCfg(
                func=events.reset_joints_uniform, mode="reset", params={"joints": joints, "position_range": (-0.3, 0.3)}
            ),
        },
        success=TermCfg(func=tracking.position_command_reached, params={**ee_cmd, "threshold": SUCCESS_THRESHOLD}),
        progress=TermCfg(func=tracking.PositionCommandProgress, params={**ee_cmd, "distance_scale": 0.5}),
    )
    if play:
        cfg.num_envs = 16
    return cfg


def make_arm_reach_agent_cfg() -> RunnerCfg:
    # 30 iterations (0.74M env steps) reach every target of play's 200 episodes; on 2 CPU cores the
    # README's first command (train, play, export) then takes about 1.5 minutes.
    return ppo_agent_cfg("arm_reach", max_iterations=30, save_interval=10)


def make_arm_reach_sparse_cfg(play: bool = False) -> TaskCfg:
    """`arm_reach` with only the sparse success signal (and small regularisers): the test bed of learned rewards.

    The reward is 5 per second while the tool-centre point is within 3 cm of the target; everything
    else must come from a learned reward. The learned terms are carried switched off (empty paths) and
    switched on by path:
        env.rewards.potential.params.potential=PATH       (batonlab reward fit-potential)
        env.rewards.count_bonus.params.function=PATH      (batonlab reward write-progress; a function that
            fails stops training, unless env.rewards.count_bonus.params.turn_off_on_failure=true)
        env.rewards.progress.params.demo=PATH env.rewards.progress.params.encoder=PATH   (batonlab reward fit-progress)
    """
    cfg = make_arm_reach_cfg(play=play)
    cfg.rewards = {
        "success": RewardTermCfg(func=sparse.success_indicator, weight=5.0),
        "action_rate": cfg.rewards["action_rate"],
        "joint_vel": cfg.rewards["joint_vel"],
        "potential": RewardTermCfg(func=learned.PotentialShaping, params={"potential": "", "gamma": 0.99}, weight=1.0),
        "count_bonus": RewardTermCfg(func=learned.ProgressCountBonus,
                                     params={"function": "", "beta": 20.0, "bins": 20, "turn_off_on_failure": False},
                                     weight=1.0),
        # 64 envs rendered per step: at the benchmark's 256 envs each is seen every 4 steps, inside the
        # ~10 steps a reach takes (scale num_rendered with num_envs; see ProgressReward).
        "progress": RewardTermCfg(func=progress.ProgressReward,
                                   params={"encoder": "", "demo": "", "restart_on": "ee_target", "render_every": 1,
                                           "num_rendered": 64, "confidence_threshold": 0.5},
                                   weight=5.0),
    }
    return cfg


def make_arm_reach_sparse_agent_cfg() -> RunnerCfg:
    return variant_agent_cfg(make_arm_reach_agent_cfg, "arm_reach_sparse")


register("arm_reach_sparse", make_arm_reach_sparse_cfg, make_arm_reach_sparse_agent_cfg,
         "arm_reach with a sparse success-only reward (for learned rewards)")
register("arm_reach", make_arm_reach_cfg, make_arm_reach_agent_cfg, "table-mounted 6-DoF arm reaches a commanded position",
         success_bar=SuccessBar(0.9, max_iterations=300))
