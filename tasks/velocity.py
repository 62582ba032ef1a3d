# SPDX-License-Identifier: BSD-3-Clause
"""`velocity`: `wl_velocity`'s recipe on any floating-base robot on legs or wheels, given as a robot
description (`batonlab.robots.description`); the default robot is the wheel-legged biped with its arm
stowed (`assets/wheel_legged/wheel_legged.yaml`), on which it is `wl_velocity`.

    batonlab train task=velocity robot=path/to/robot.yaml

The recipe is `mobile_robot.make_balance_cfg` + `mobile_robot.make_velocity_recipe`: command tracking of
forward speed, yaw rate and base height, the locomotion rewards, terrain grid with level and command
curricula, domain randomisation, falls as terminations. What it needs to know about the robot comes
from the description and from the model in its default pose (`batonlab.robots.stance`):

- the policy drives the joints between the base and the feet (the bodies lowest in the default
  pose): position-controlled ones are `legs`, velocity-controlled ones `wheels`; other actuated
  joints (an arm) hold their default pose (`hold_pose` event, `deploy.held_joints`);
- observations read the IMU (`imu_site`: sensors `imu_gyro`, `imu_quat`); base height is measured from
  the IMU site down to the feet (sensors `base_pos_w`, `<foot>_pos_w`, added here);
- the height command spans `HEIGHT_RANGE_FRACTION` of the standing height and defaults to it;
- falls: contact sensors `<link>_ground_contact` on every link with a ground geom that is not a foot
  (a foot-free subtree such as an arm counts as one link); choose others among them with
  `env.terminations.illegal_contact.params.sensors=[...]`;
- `leg_mirror` pairs the leg joints that mirror each other (dropped when none do).

The free joint is renamed `root` and the integrator is MuJoCo's `implicitfast`, as in the
wheel-legged model. On the robot, a stopped policy holds then damps its joints
(`env.deploy.stop_behavior`; `wl_velocity` crouches with its own pose).
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

import mujoco

from batonlab import events
from batonlab.env.cfg import DeployCfg, EventTermCfg, TaskCfg
from batonlab.rl.cfg import RunnerCfg
from batonlab.robots import load
from batonlab.robots import wheel_legged as wl
from batonlab.robots.assets import ASSETS_DIR
from batonlab.robots.description import RobotDescription, RobotDescriptionError
from batonlab.robots.loader import IMU_SITE, as_description, default_joint_pos
from batonlab.robots.stance import NoContactLink, Stance, name_ground_geoms, read_stance
from batonlab.tasks import SuccessBar, register
from batonlab.tasks.agents import variant_agent_cfg
from batonlab.tasks.mobile_robot import MobileRobot, add_sky_and_light, make_balance_cfg, make_velocity_recipe
from batonlab.tasks.wl_velocity import HEIGHT_RANGE, make_wl_velocity_agent_cfg

DEFAULT_ROBOT = ASSETS_DIR / "wheel_legged" / "wheel_legged.yaml"
"""The robot of `task=velocity` without `robot=`: the wheel-legged biped with its arm stowed."""

HEIGHT_RANGE_FRACTION = (HEIGHT_RANGE[0] / wl.NOMINAL_BASE_HEIGHT, HEIGHT_RANGE[1] / wl.NOMINAL_BASE_HEIGHT)
"""Base height command range as fractions of the standing height: `wl_velocity`'s (0.36, 0.48) m of
0.463 m, i.e. crouching to 78 % and stretching to 104 % [-]."""

BASE_POSITION_SENSOR = "base_pos_w"
"""`framepos` of the IMU site in the world: the top of the base height measurement."""

CONTACT_DATA_FOUND_FORCE = 1 | 2
"""MuJoCo contact sensor data bits: "found" and "force"."""
CONTACT_REDUCE_NETFORCE = 3
"""MuJoCo contact sensor reduction: one net force over the matched contacts."""

TRACK_CAMERA = "track"
"""Camera of `play` videos; added to the base (following the robot from its side) when the model has none."""


def make_velocity_cfg(play: bool = False, robot: str | Path | None = None) -> TaskCfg:
    """Any legged or wheeled robot tracks speed, yaw rate and height on terrain (wl_velocity's recipe).

    Args:
        robot: The robot description YAML (None: `DEFAULT_ROBOT`).
    """
    mobile = description_robot(robot if robot is not None else DEFAULT_ROBOT)
    cfg = make_balance_cfg(mobile, play=play)
    if cfg.deploy.held_joints:
        cfg.events["hold_pose"] = EventTermCfg(
            func=events.hold_default_pose, mode="reset", params={"joints": cfg.deploy.held_joints}
        )
    height_range = tuple(round(f * mobile.nominal_height, 3) for f in HEIGHT_RANGE_FRACTION)
    return make_velocity_recipe(cfg, height_range, play=play)


def make_velocity_agent_cfg() -> RunnerCfg:
    return variant_agent_cfg(make_wl_velocity_agent_cfg, "velocity")


def description_robot(source: str | Path | dict | RobotDescription) -> MobileRobot:
    """The `MobileRobot` of a robot description: joints by role, sensor and geom names, heights.

    Raises:
        RobotDescriptionError / FileNotFoundError: the description does not load, or the robot does not fit the
            task: a fixed base, no IMU site, or a velocity-controlled joint that moves no foot.
    """
    with _quiet_empty_prefix():
        description = as_description(source)
    if description.base != "floating":
        raise RobotDescriptionError(f"task velocity needs a floating base; robot '{description.name}' has base: "
                                    f"{description.base}")
    if not description.imu_site:
        raise RobotDescriptionError(f"task velocity reads an IMU; robot '{description.name}' has no imu_site")
    defaults = default_joint_pos(description)
    spec = robot_spec(description)
    try:
        stance = read_stance(spec, defaults, description.joint_names)
    except ValueError as err:  # no ground contact, no joint that moves the feet
        raise RobotDescriptionError(f"task velocity cannot stand robot '{description.name}': {err}") from None
    control = {j.name: j.control for j in description.joints}
    stray = [j for j in stance.riders if control[j] == "velocity"]
    if stray:
        raise RobotDescriptionError(f"robot '{description.name}': velocity-controlled joints {stray} move no foot; "
                                    "task velocity drives wheels (velocity) and legs (position) and holds the other "
                                    "joints at their default pose")
    legs = tuple(j for j in stance.legs if control[j] == "position" and j not in description.held_joints)
    mirrored = [(a, b) for a, b in zip(*stance.mirror) if a in legs and b in legs]

    def build() -> mujoco.MjSpec:
        return make_velocity_scene_spec(description, stance)

    # The file's name only, as reach's scene: config.yaml's `robot_sha256` says which files, wherever they are.
    shown = Path(source).name if isinstance(source, (str, Path)) else description.name
    build.__qualname__ = f"make_velocity_scene_spec(robot={shown!r})"
    return MobileRobot(
        build=build,
        default_joint_pos=defaults,
        legs=legs,
        wheels=tuple(j for j in stance.legs if control[j] == "velocity"),
        base_body=stance.root_body,
        foot_geoms=stance.foot_geoms,
        ground_contact_sensors=tuple(contact_sensor_name(link) for link in stance.no_contact_links),
        leg_torque_sensors=tuple(f"{j}_torque" for j in legs),
        height_params={
            "base_sensor": BASE_POSITION_SENSOR,
            "wheel_sensors": tuple(f"{foot}_pos_w" for foot in stance.feet),
            "wheel_radius": stance.foot_point_height,
        },
        mirror=(tuple(a for a, _ in mirrored), tuple(b for _, b in mirrored)),
        nominal_height=stance.standing_height,
        camera=TRACK_CAMERA,
        deploy=DeployCfg(held_joints=tuple(j for j in description.joint_names
                                           if j in stance.riders or j in description.held_joints)),
    )


def robot_spec(description: RobotDescription) -> mujoco.MjSpec:
    """The robot as loaded from its description, its free joint named `root` and its ground geoms named."""
    with _quiet_empty_prefix():
        spec = load(description)
    root = spec.worldbody.bodies[0]
    for joint in root.joints:
        if joint.type == mujoco.mjtJoint.mjJNT_FREE:
            joint.name = wl.ROOT_JOINT
    name_ground_geoms(spec)
    return spec


def make_velocity_scene_spec(description: RobotDescription, stance: Stance) -> mujoco.MjSpec:
    """The robot standing on z = 0 in its default pose, with the sensors the recipe reads, a camera, a sky and a light."""
    spec = robot_spec(description)
    spec.modelname = f"velocity_{description.name}"
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    root = spec.body(stance.root_body)
    root.pos = [0.0, 0.0, stance.standing_height]
    _replace_sensor(spec, BASE_POSITION_SENSOR, type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                    objtype=mujoco.mjtObj.mjOBJ_SITE, objname=IMU_SITE)
    for foot, geom in zip(stance.feet, stance.foot_points):
        _replace_sensor(spec, f"{foot}_pos_w", type=mujoco.mjtSensor.mjSENS_FRAMEPOS,
                        objtype=mujoco.mjtObj.mjOBJ_GEOM, objname=geom)
    for joint in stance.legs:
        _replace_sensor(spec, f"{joint}_torque", type=mujoco.mjtSensor.mjSENS_ACTUATORFRC,
                        objtype=mujoco.mjtObj.mjOBJ_ACTUATOR, objname=joint)
    for link in stance.no_contact_links:
        _replace_sensor(spec, contact_sensor_name(link), type=mujoco.mjtSensor.mjSENS_CONTACT,
                        objtype=mujoco.mjtObj.mjOBJ_XBODY if link.subtree else mujoco.mjtObj.mjOBJ_BODY,
                        objname=link.body, reftype=mujoco.mjtObj.mjOBJ_BODY, refname="world",
                        intprm=[CONTACT_DATA_FOUND_FORCE, CONTACT_REDUCE_NETFORCE, 1])
    if spec.camera(TRACK_CAMERA) is None:
        camera = root.add_camera(name=TRACK_CAMERA, mode=mujoco.mjtCamLight.mjCAMLIGHT_TRACKCOM, pos=[0.4, -2.2, 0.55])
        camera.alt.type = mujoco.mjtOrientation.mjORIENTATION_XYAXES
        camera.alt.xyaxes = [1.0, 0.18, 0.0, -0.04, 0.2, 1.0]
    add_sky_and_light(spec)
    return spec


def contact_sensor_name(link: NoContactLink) -> str:
    """Name of the ground contact sensor of a link that must not touch the ground."""
    return f"{link.body}_ground_contact"


# Private helpers.


@contextlib.contextmanager
def _quiet_empty_prefix():
    """Silence MuJoCo's warning on `attach` with an empty prefix while a model file is parsed (names are
    kept on purpose, see `batonlab.robots.assets.attach`); other warnings pass."""
    previous = mujoco.get_mju_user_warning()

    def warn(message: str) -> None:
        if "empty prefix" in message:
            return
        if previous is not None:
            previous(message)
        else:
            warnings.warn(f"MuJoCo: {message}", RuntimeWarning, stacklevel=2)

    mujoco.set_mju_user_warning(warn)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


def _replace_sensor(spec: mujoco.MjSpec, name: str, **attributes) -> None:
    """Add sensor `name`, replacing the model's sensor of that name (the recipe defines what it measures)."""
    existing = spec.sensor(name)
    if existing is not None:
        spec.delete(existing)
    spec.add_sensor(name=name, **attributes)


register("velocity", make_velocity_cfg, make_velocity_agent_cfg,
         "any legged or wheeled robot (robot=<description.yaml>) tracks speed, yaw rate and height on terrain",
         success_bar=SuccessBar(0.8, max_iterations=1200))
