# SPDX-License-Identifier: BSD-3-Clause
"""The recipes every floating-base robot on legs or wheels shares: balancing in place, then velocity tracking on terrain.

`MobileRobot` names what the recipes read from a robot (joints by role, sensors, bodies, geoms, heights);
`wl_balance` / `wl_velocity` apply them to the bundled wheel-legged biped, `velocity` to any robot description.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import mujoco

from batonlab import commands, events, observations, terminations
from batonlab.actions import JointPositionAction, JointVelocityAction
from batonlab.curricula.command_range import CommandRangeCurriculum
from batonlab.curricula.levels import TerrainLevels
from batonlab.env.cfg import (ActionTermCfg, CommandTermCfg, CurriculumTermCfg, DeployCfg, EventTermCfg, ObsGroupCfg,
                              ObsTermCfg, RewardTermCfg, SceneCfg, SimCfg, TaskCfg, TermCfg, TerminationTermCfg)
from batonlab.rewards import locomotion, regularizers
from batonlab.terrain import TerrainCfg

ROOT_JOINT = "root"
"""The free joint of every `MobileRobot`'s base (the default `joint` of the root-state terms)."""

COMMAND = "base_velocity"
"""Name of the velocity / height command (zero velocity at nominal height in wl_balance)."""


LIN_VEL_X_START = (-1.0, 1.0)
"""Forward-speed command range at the start of training [m/s]."""


LIN_VEL_X_LIMIT = (-1.5, 1.5)
"""Forward-speed command range the curriculum widens to [m/s]."""


SUCCESS_MAX_SPEED_ERROR = 0.25
"""Mean |v - v_cmd| over an episode that still counts as tracking [m/s]."""


def add_sky_and_light(spec: mujoco.MjSpec) -> None:
    """A gradient sky, a directional light and a 640 x 480 offscreen buffer for `play` videos."""
    spec.visual.global_.offwidth = 640
    spec.visual.global_.offheight = 480
    spec.add_texture(
        name="sky", type=mujoco.mjtTexture.mjTEXTURE_SKYBOX, builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
        rgb1=[0.55, 0.7, 0.9], rgb2=[0.1, 0.12, 0.2], width=32, height=32,
    )
    spec.worldbody.add_light(
        pos=[0, 0, 6], dir=[0.2, 0.3, -1], type=mujoco.mjtLightType.mjLIGHT_DIRECTIONAL, diffuse=[0.8, 0.8, 0.8]
    )


@dataclass(frozen=True)
class MobileRobot:
    """What the balance and velocity recipes need to know about a floating-base robot on legs or wheels:
    its joints by role and the names of the sensors, bodies and geoms its terms read."""

    build: Callable[[], mujoco.MjSpec]
    """Returns a fresh spec of the robot with a light and a sky (no ground); its free joint is `ROOT_JOINT`."""
    default_joint_pos: dict[str, float]
    """Default pose by joint name [rad or m]: the offsets of leg actions, the pose held joints keep."""
    legs: tuple[str, ...]
    """Position-controlled joints the policy drives, in policy order."""
    wheels: tuple[str, ...]
    """Velocity-controlled joints the policy drives, in policy order; empty for a robot on feet."""
    base_body: str
    """The body on the free joint (mass and centre-of-mass randomisation)."""
    foot_geoms: tuple[str, ...]
    """Collision geoms meant to touch the ground (tyres, feet): friction randomisation."""
    ground_contact_sensors: tuple[str, ...]
    """Contact sensors (data "found force", net force) of the links that must never touch the ground."""
    leg_torque_sensors: tuple[str, ...]
    """`actuatorfrc` sensors of the leg actuators (torque penalty)."""
    height_params: dict[str, Any]
    """Parameters of `observations.base_height`: base and foot-point `framepos` sensors and the feet points'
    height above the ground (`wheel_radius`) [m]."""
    mirror: tuple[tuple[str, ...], tuple[str, ...]]
    """(left, right) leg joints equal to each other in a symmetric stance; empty: no mirror penalty."""
    nominal_height: float
    """Standing base height: the height command of balancing [m]."""
    camera: str
    """Camera of `play` videos."""
    deploy: DeployCfg
    """Held joints and the safe stop on the robot."""


def make_balance_cfg(robot: MobileRobot, play: bool = False) -> TaskCfg:
    """The balancing recipe on `robot`: stand at the nominal height under pushes and randomisation.

    Held joints (`robot.deploy.held_joints`) get no hold event here: the caller names it.
    """
    legs, wheels = robot.legs, robot.wheels
    cmd = {"command": COMMAND}

    def policy_terms(noise: bool) -> dict[str, ObsTermCfg]:
        k = 1.0 if noise else 0.0
        terms = {
            "base_ang_vel": ObsTermCfg(func=observations.sensor, params={"name": "imu_gyro"}, noise_std=0.2 * k, scale=0.25),
            "projected_gravity": ObsTermCfg(func=observations.projected_gravity, params={"sensor": "imu_quat"}, noise_std=0.05 * k),
            "command": ObsTermCfg(func=observations.generated_command, params=cmd),
            "leg_pos": ObsTermCfg(func=observations.joint_pos_rel, params={"joints": legs}, noise_std=0.01 * k),
            "leg_vel": ObsTermCfg(func=observations.joint_vel, params={"joints": legs}, noise_std=1.0 * k, scale=0.05),
        }
        if wheels:
            terms["wheel_vel"] = ObsTermCfg(func=observations.joint_vel, params={"joints": wheels}, noise_std=1.0 * k, scale=0.05)
        terms["last_action"] = ObsTermCfg(func=observations.last_action)
        return terms

    critic_terms = {
        **policy_terms(noise=False),
        "base_lin_vel": ObsTermCfg(func=observations.root_lin_vel_b),
        "base_height": ObsTermCfg(func=observations.base_height, params=dict(robot.height_params)),
    }
    actions = {"legs": ActionTermCfg(cls=JointPositionAction, joints=legs, scale=0.25)}
    if wheels:
        actions["wheels"] = ActionTermCfg(cls=JointVelocityAction, joints=wheels, scale=8.0, use_default_offset=False)
    cfg = TaskCfg(
        scene=SceneCfg(
            build=robot.build,
            default_joint_pos=dict(robot.default_joint_pos),
            camera=robot.camera,
            terrain=TerrainCfg(kind="plane"),
        ),
        sim=SimCfg(physics_dt=0.005, decimation=4),
        num_envs=1024,
        episode_length_s=10.0,
        actions=actions,
        commands={
            COMMAND: CommandTermCfg(
                cls=commands.BaseVelocityCommand,
                resampling_time_range_s=(10.0, 10.0),
                params={
                    "lin_vel_x_range": (0.0, 0.0),
                    "ang_vel_z_range": (0.0, 0.0),
                    "height_range": (robot.nominal_height, robot.nominal_height),
                    "default_height": robot.nominal_height,
                },
            )
        },
        observations={
            "policy": ObsGroupCfg(terms=policy_terms(noise=True), enable_corruption=not play),
            "critic": ObsGroupCfg(terms=critic_terms),
        },
        rewards={
            "track_lin_vel_x": RewardTermCfg(func=locomotion.track_lin_vel_x_exp, params={**cmd, "std": 0.25}, weight=2.0),
            "track_ang_vel_z": RewardTermCfg(func=locomotion.track_ang_vel_z_exp, params={**cmd, "std": 0.25}, weight=1.0),
            "track_height": RewardTermCfg(
                func=locomotion.track_base_height_exp, params={**cmd, "std": 0.05, **robot.height_params}, weight=1.0
            ),
            "terminated": RewardTermCfg(func=locomotion.is_terminated, weight=-200.0),
            "flat_orientation": RewardTermCfg(func=locomotion.flat_orientation_l2, weight=-5.0),
            "lin_vel_z": RewardTermCfg(func=locomotion.lin_vel_z_l2, weight=-1.0),
            "lin_vel_y": RewardTermCfg(func=locomotion.lin_vel_y_l2, weight=-0.5),
            "ang_vel_xy": RewardTermCfg(func=locomotion.ang_vel_xy_l2, weight=-0.05),
            "leg_mirror": RewardTermCfg(
                func=locomotion.joint_mirror_l2, params={"left": robot.mirror[0], "right": robot.mirror[1]}, weight=-1.0
            ),
            "leg_torque": RewardTermCfg(
                func=locomotion.actuator_force_l2, params={"sensors": robot.leg_torque_sensors}, weight=-2e-5
            ),
            "action_rate": RewardTermCfg(func=regularizers.action_rate_l2, weight=-0.01),
        },
        terminations={
            "illegal_contact": TerminationTermCfg(func=terminations.illegal_contact,
                                                  params={"sensors": robot.ground_contact_sensors}),
            "bad_orientation": TerminationTermCfg(func=terminations.bad_orientation, params={"limit_angle": 1.0}),
        },
        events={
            # Startup: one draw per world for the whole run.
            ("wheel_friction" if wheels else "foot_friction"): EventTermCfg(
                func=events.randomize_geom_friction,
                mode="startup",
                params={"geoms": robot.foot_geoms, "friction_range": (0.4, 1.2)},
            ),
            "base_mass": EventTermCfg(
                func=events.randomize_body_mass_and_com,
                mode="startup",
                params={
                    "body": robot.base_body,
                    "added_mass_range": (-1.0, 3.0),
                    "com_offset_range": {"x": (-0.03, 0.03), "y": (-0.02, 0.02), "z": (-0.02, 0.02)},
                },
            ),
            # Reset: redrawn every episode.
            # One event per MjModel field: an event writes whole per-world arrays from the nominal model.
            "actuator_gains": EventTermCfg(
                func=events.randomize_actuator_gains,
                mode="reset",
                params={
                    "joints": legs + wheels,
                    "kp_scale_range": (0.8, 1.2),
                    "kd_scale_range": (0.8, 1.2),
                    "strength_range": (0.85, 1.1),
                },
            ),
            "action_delay": EventTermCfg(func=events.randomize_action_delay, mode="reset", params={"delay_range": (0, 2)}),
            "reset_base": EventTermCfg(
                func=events.reset_root_on_terrain,
                mode="reset",
                params={
                    "position_range": {"x": (-0.5, 0.5), "y": (-0.5, 0.5), "z": (0.03, 0.06)},
                    "orientation_range": {"roll": (-0.1, 0.1), "pitch": (-0.3, 0.3), "yaw": (-math.pi, math.pi)},
                    "velocity_range": {"x": (-0.5, 0.5), "y": (-0.1, 0.1), "pitch": (-0.5, 0.5), "yaw": (-0.5, 0.5)},
                },
            ),
            "reset_legs": EventTermCfg(
                func=events.reset_joints_uniform, mode="reset", params={"joints": legs, "position_range": (-0.2, 0.2)}
            ),
            # Interval: pushes.
            "push": EventTermCfg(
                func=events.push_by_setting_velocity,
                mode="interval",
                interval_range_s=(3.0, 5.0),
                params={"joint": ROOT_JOINT, "velocity_range": {"x": (-0.6, 0.6), "y": (-0.2, 0.2), "yaw": (-0.5, 0.5)}},
            ),
        },
        success=TermCfg(func=terminations.survived),
        deploy=robot.deploy,
    )
    if not robot.mirror[0]:
        del cfg.rewards["leg_mirror"]
    if play:
        cfg.num_envs = 16
    return cfg


def make_velocity_recipe(cfg: TaskCfg, height_range: tuple[float, float], play: bool = False) -> TaskCfg:
    """Turn a balancing cfg (`make_balance_cfg`) into velocity tracking on terrain, in place.

    Args:
        cfg: The balance task of the robot.
        height_range: Range of the base height command [m].
    """
    cfg.episode_length_s = 20.0
    cfg.scene.terrain = TerrainCfg(kind="grid", num_levels=6, max_init_level=5 if play else 1)

    command = cfg.commands[COMMAND]
    command.resampling_time_range_s = (8.0, 12.0)
    command.params.update(
        lin_vel_x_range=LIN_VEL_X_START, ang_vel_z_range=(-1.0, 1.0), height_range=tuple(height_range),
        standing_fraction=0.1,
    )
    cfg.rewards["track_ang_vel_z"].params["std"] = 0.4
    cfg.rewards["track_height"].weight = 0.5

    # Spawn on the tile's platform, heading anywhere; gentler initial states and pushes than wl_balance.
    cfg.events["reset_base"].params = {
        "position_range": {"x": (-0.3, 0.3), "y": (-0.3, 0.3), "z": (0.03, 0.05)},
        "orientation_range": {"pitch": (-0.1, 0.1), "yaw": (-math.pi, math.pi)},
        "velocity_range": {"x": (-0.3, 0.3), "yaw": (-0.3, 0.3)},
    }
    cfg.events["reset_legs"].params["position_range"] = (-0.1, 0.1)
    cfg.events["push"].interval_range_s = (6.0, 10.0)
    cfg.terminations["out_of_bounds"] = TerminationTermCfg(
        func=terminations.out_of_terrain_bounds, params={"margin": 1.0}, time_out=True
    )

    cfg.curriculum = {
        "terrain_levels": CurriculumTermCfg(func=TerrainLevels, params={"command": COMMAND}),
        "command_range": CurriculumTermCfg(
            func=CommandRangeCurriculum,
            params={
                "command": COMMAND,
                "reward_term": "track_lin_vel_x",
                "limits": {"lin_vel_x": LIN_VEL_X_LIMIT},
                "step": {"lin_vel_x": 0.1},
                "fraction": 0.7,  # of the maximum; the kernel (std 0.25 m/s) is stricter than legged_gym's
            },
        ),
    }
    cfg.success = TermCfg(func=terminations.command_tracked, params={"command": COMMAND, "max_mean_error": SUCCESS_MAX_SPEED_ERROR})
    if play:
        # Curricula stay: a checkpoint restores their state (terrain levels, command ranges) into the play env.
        cfg.events.pop("push", None)
    return cfg
