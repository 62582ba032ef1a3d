# SPDX-License-Identifier: BSD-3-Clause
"""`wl_balance` / `wl_balance_noarm`: the wheel-legged biped stands and balances in place.

Episodes start from randomised states (tilt, velocities, leg poses) and the robot is pushed every
few seconds; it must stay upright at its nominal height without drifting, for the whole 10 s
episode (success = survived to the time limit). The arm variant carries arm6 in its stowed pose.

The recipe, `mobile_robot.make_balance_cfg`, reads everything robot-specific from a `MobileRobot`
(`wl_robot` here; the `velocity` task derives one from any robot description); `wl_velocity` and
`wl_loco_manip` build on `make_wl_balance_cfg`. Domain randomisation is a set of event terms, each
reachable from the command line, e.g.

    batonlab train task=wl_balance env.events.push.interval_range_s=[2,4] \\
        env.events.base_mass.params.added_mass_range=[-1,4] env.events.action_delay.params.delay_range=[0,1] \\
        env.events.wheel_friction.params.friction_range=[0.3,1.2] '~env.events.actuator_gains' \\
        env.observations.policy.terms.base_ang_vel.noise_std=0.3
"""

from __future__ import annotations

import mujoco

from batonlab import events
from batonlab.env.cfg import DeployCfg, EventTermCfg, TaskCfg
from batonlab.rl.cfg import RunnerCfg
from batonlab.robots import wheel_legged as wl
from batonlab.tasks import register
from batonlab.tasks.agents import ppo_agent_cfg, variant_agent_cfg
from batonlab.tasks.mobile_robot import MobileRobot, add_sky_and_light, make_balance_cfg

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


def _scene_builder(with_arm: bool):
    def build() -> mujoco.MjSpec:
        return make_wl_scene_spec(with_arm)

    build.__qualname__ = f"make_wl_scene_spec(with_arm={with_arm})"
    return build


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


def make_wl_balance_agent_cfg() -> RunnerCfg:
    return ppo_agent_cfg("wl_balance", max_iterations=150, obs_groups={"actor": ["policy"], "critic": ["critic"]})


def make_wl_balance_noarm_cfg(play: bool = False) -> TaskCfg:
    return make_wl_balance_cfg(play=play, with_arm=False)


def make_wl_balance_noarm_agent_cfg() -> RunnerCfg:
    return variant_agent_cfg(make_wl_balance_agent_cfg, "wl_balance_noarm")


register("wl_balance", make_wl_balance_cfg, make_wl_balance_agent_cfg,
         "wheel-legged biped with stowed arm balances in place under pushes")
register("wl_balance_noarm", make_wl_balance_noarm_cfg, make_wl_balance_noarm_agent_cfg,
         "wheel-legged biped (no arm) balances in place under pushes")
