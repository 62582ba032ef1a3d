# SPDX-License-Identifier: BSD-3-Clause
"""`wl_balance` / `wl_balance_noarm`: the wheel-legged biped stands and balances in place.

Episodes start from randomised states (tilt, velocities, leg poses) and the robot is pushed every
few seconds; it must stay upright at its nominal height without drifting, for the whole 10 s
episode (success = survived to the time limit). The arm variant carries arm6 in its stowed pose.

This module also holds the parts every wheel-legged task shares (scene, observations, actions,
domain randomisation); `wl_velocity` builds on `make_wl_balance_cfg`. The recipe itself,
`make_balance_cfg`, reads everything robot-specific from a `MobileRobot` (`wl_robot` here; the
`velocity` task derives one from any robot description). Domain randomisation is a set of event
terms, each reachable from the command line, e.g.

    batonlab train task=wl_balance env.events.push.interval_range_s=[2,4] \\
        env.events.base_mass.params.added_mass_range=[-1,4] env.events.action_delay.params.delay_range=[0,1] \\
        env.events.wheel_friction.params.friction_range=[0.3,1.2] '~env.events.actuator_gains' \\
        env.observations.policy.terms.base_ang_vel.noise_std=0.3
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import mujoco

from batonlab import commands, events, observations, terminations
from batonlab.actions import JointPositionAction, JointVelocityAction
from batonlab.env.cfg import (
    ActionTermCfg,
    CommandTermCfg,
    DeployCfg,
    EventTermCfg,
    ObsGroupCfg,
    ObsTermCfg,
    RewardTermCfg,
    SceneCfg,
    SimCfg,
    TaskCfg,
    TermCfg,
    TerminationTermCfg,
)
from batonlab.rewards import locomotion, regularizers
from batonlab.rl.cfg import AlgorithmCfg, PolicyCfg, RunnerCfg
from batonlab.robots import wheel_legged as wl
from batonlab.tasks import register
from batonlab.terrain import TerrainCfg

COMMAND = "base_velocity"
"""Name of the velocity / height command (zero velocity at nominal height in wl_balance)."""

HEIGHT_PARAMS = {
    "base_sensor": "base_pos_w",
    "wheel_sensors": ("left_wheel_pos_w", "right_wheel_pos_w"),
    "wheel_radius": wl.WHEEL_RADIUS,
}
"""Sensors that measure the base height above the ground under the wheels."""

LEG_TORQUE_SENSORS = tuple(f"{j}_torque" for j in wl.LEG_JOINTS)


def make_wl_scene_spec(with_arm: bool = True) -> mujoco.MjSpec:
    """The robot (optionally with arm6), a light and a sky; the ground comes from `SceneCfg.terrain`."""
    spec = wl.make_wheel_legged_spec(with_arm=with_arm)
    spec.modelname = "wl_scene" if with_arm else "wl_scene_noarm"
    add_sky_and_light(spec)
    return spec


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


def _scene_builder(with_arm: bool):
    def build() -> mujoco.MjSpec:
        return make_wl_scene_spec(with_arm)

    build.__qualname__ = f"make_wl_scene_spec(with_arm={with_arm})"
    return build


@dataclass(frozen=True)
class MobileRobot:
    """What the balance and velocity recipes need to know about a floating-base robot on legs or wheels:
    its joints by role and the names of the sensors, bodies and geoms its terms read."""

    build: Callable[[], mujoco.MjSpec]
    """Returns a fresh spec of the robot with a light and a sky (no ground); its free joint is `root`."""
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


def wl_robot(with_arm: bool = True) -> MobileRobot:
    """The bundled wheel-legged biped (`batonlab.robots.wheel_legged`), with or without arm6 stowed."""
    return MobileRobot(
        build=_scene_builder(with_arm),
        default_joint_pos=wl.home_pose(with_arm),
        legs=wl.LEG_JOINTS,
        wheels=wl.WHEEL_JOINTS,
        base_body=wl.BASE_BODY,
        foot_geoms=("left_wheel_collision", "right_wheel_collision"),
        ground_contact_sensors=wl.GROUND_CONTACT_SENSORS + ((wl.ARM_GROUND_CONTACT_SENSOR,) if with_arm else ()),
        leg_torque_sensors=LEG_TORQUE_SENSORS,
        height_params=HEIGHT_PARAMS,
        mirror=(wl.LEG_JOINTS[:2], wl.LEG_JOINTS[2:]),
        nominal_height=wl.NOMINAL_BASE_HEIGHT,
        camera="track",
        # On the robot: stop by crouching (wheels brake within their deceleration limit, legs fold), then damp.
        deploy=DeployCfg(held_joints=wl.arm_joints() if with_arm else (), stop_behavior="crouch",
                         stop_pose=dict(wl.CROUCH_POSE), stop_time_s=wl.CROUCH_TIME_S),
    )


def make_wl_balance_cfg(play: bool = False, with_arm: bool = True) -> TaskCfg:
    cfg = make_balance_cfg(wl_robot(with_arm), play=play)
    if with_arm:
        # The arm is not driven by the policy: its servos hold the stowed pose (and the robot side holds it too).
        cfg.events["arm_stowed"] = EventTermCfg(
            func=events.hold_default_pose, mode="reset", params={"joints": cfg.deploy.held_joints}
        )
    return cfg


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
                params={"joint": wl.ROOT_JOINT, "velocity_range": {"x": (-0.6, 0.6), "y": (-0.2, 0.2), "yaw": (-0.5, 0.5)}},
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


def make_wl_balance_agent_cfg() -> RunnerCfg:
    return RunnerCfg(
        experiment_name="wl_balance",
        num_steps_per_env=24,
        max_iterations=150,
        save_interval=50,
        obs_groups={"actor": ["policy"], "critic": ["critic"]},
        policy=PolicyCfg(actor_hidden_dims=(128, 128, 64), critic_hidden_dims=(128, 128, 64), init_noise_std=1.0),
        algorithm=AlgorithmCfg(learning_rate=1e-3, entropy_coef=0.005, num_mini_batches=4),
    )


def make_wl_balance_noarm_cfg(play: bool = False) -> TaskCfg:
    return make_wl_balance_cfg(play=play, with_arm=False)


def make_wl_balance_noarm_agent_cfg() -> RunnerCfg:
    cfg = make_wl_balance_agent_cfg()
    cfg.experiment_name = "wl_balance_noarm"
    return cfg


register("wl_balance", make_wl_balance_cfg, make_wl_balance_agent_cfg,
         "wheel-legged biped with stowed arm balances in place under pushes")
register("wl_balance_noarm", make_wl_balance_noarm_cfg, make_wl_balance_noarm_agent_cfg,
         "wheel-legged biped (no arm) balances in place under pushes")
