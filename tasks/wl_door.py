# SPDX-License-Identifier: BSD-3-Clause
"""`wl_door`: the wheel-legged robot with arm6 drives to a latched, spring-closed door, takes its lever handle, presses
it down and pulls the door open past 60° while backing away. Success: at some step of the episode, the door at 60° or
more with the tool point still at the handle (pulled open, not knocked open).

The policy is the upper level of a hierarchy: its actions are commands (base speed and yaw rate, tool pose; see
`batonlab.actions.command_layer`) and the gripper. The whole-body policy of `wl_loco_manip_pose`, frozen, executes the
commands: `env.actions.commands.params.export=RUN/exported` names its export folder. `wl_door_scripted` executes them
from exact state instead, the torso held upright by a virtual torque: the scripted expert's variant, which shows the
task solvable without a trained lower level, and where an upper policy can learn before it runs over the trained one.

The door (`assets/door`, 0.35 × 0.45 m) stands on a 0.15 m plinth 1 m ahead of the robot, facing it, its handle at
0.40 m, level with the arm's reach below the shoulder; it opens toward the robot. The door's pose, width, panel mass,
spring, damping and friction, and the handle's friction and spring are drawn per episode.

Observation groups:
- `policy` (deployable): the base's angular velocity and gravity direction, the tool pose and gripper opening, the
  handle position in the arm base frame and the door and handle angles (as perception reports them: noisy, late),
  the last action;
- `privileged` (simulation only): the exact door state, the tool-to-handle vector, what the randomisation drew.
"""

from __future__ import annotations

import mujoco

from batonlab import events, observations
from batonlab.actions import JointPositionAction, ScriptedWholeBodyAction, WholeBodyPolicyAction
from batonlab.experts import DoorOpenerExpert
from batonlab.env.cfg import ActionTermCfg, EventTermCfg, ObsGroupCfg, ObsTermCfg, RewardTermCfg, TaskCfg, TermCfg
from batonlab.rewards import door, regularizers
from batonlab.rl.cfg import RunnerCfg
from batonlab.robots import door as door_asset
from batonlab.robots import wheel_legged as wl
from batonlab.robots.arm6 import ARM_JOINTS, EE_SITE, GRIPPER_JOINT
from batonlab.tasks import register
from batonlab.tasks.agents import ppo_agent_cfg
from batonlab.tasks.mobile_robot import COMMAND
from batonlab.tasks.table_scene import add_look_at_camera
from batonlab.tasks.wl_loco_manip import (EE_COMMAND, EE_POSE, EE_QUAT_SENSOR, EE_SENSOR, IK_DAMPING,
                                          IK_ORIENTATION_WEIGHT, make_loco_manip_scene_spec,
                                          make_wl_loco_manip_pose_cfg)

OPEN_ANGLE = 1.047
"""Door angle that counts as open (60°) [rad]."""

PLINTH_HEIGHT = 0.15
"""The door stands this high above the floor [m] (its handle at 0.40 m)."""

DOOR_POS = (1.0, 0.0, PLINTH_HEIGHT)
"""Nominal origin of the door (bottom centre of its opening) [m, world]; it faces the robot (turned by π), so that it
opens toward it, its hinge at y = -0.175 and its handle at ~(0.94, -0.065, 0.40)."""

HINGE_POS_B_SENSOR, HINGE_AXIS_B_SENSOR = "door_hinge_pos_b", "door_hinge_axis_b"
"""The hinge's position [m] and opening axis in the arm base frame (simulation only: the expert's)."""

PANEL_NORMAL_B_SENSOR = "door_panel_normal_b"
"""The panel's front normal (toward the robot when closed) in the arm base frame (simulation only)."""

LEVER_B_SENSOR = "door_lever_b"
"""The lever's direction, from its spindle toward the hinge side, in the arm base frame (simulation only)."""

GRIPPER_KP, GRIPPER_KV = 3000.0, 20.0
"""The gripper servo's gains in this task [N/m, N·s/m]."""

GRIPPER_SCALE = 0.04
"""Finger opening per unit gripper action [m]: from the stowed (closed) gripper, +1 opens it fully (0.04 per finger)."""

DOOR_CAMERA = "door_view"
"""A fixed camera behind and to the left of the robot, on the robot, the handle and the panel's sweep."""

HOLD_RADIUS = 0.06
"""The tool point counts as at the handle within this distance [m]."""

WHOLE_BODY_TASK = "wl_loco_manip_pose"
"""The task whose trained whole-body policy executes the commands."""

LOWER_LEVEL_TASKS = (WHOLE_BODY_TASK, "wl_loco_manip_upper")
"""The tasks whose trained whole-body policies can execute the commands (one joint, observation and ONNX layout)."""

SCRIPTED_GAIN_SCALE = (8.0, 8.0)
"""`wl_door_scripted` multiplies the legs' and wheels' servo gains by this (drawn from the range) [-]."""

ITERATIONS = 300
"""The upper policy's training budget."""


def make_wl_door_scene_spec() -> mujoco.MjSpec:
    """The wheel-legged robot with arm6 and the door on its plinth, ahead of the robot and facing it."""
    spec = make_loco_manip_scene_spec()
    spec.modelname = "wl_door"
    mount = door_asset.add_door_mount(spec, pos=DOOR_POS, quat=(0.0, 0.0, 0.0, 1.0))
    door_asset.attach_door(spec, mount, latch=True, base_site="arm_base_site")
    # A grip that squeezes: arm6's gripper servo (kp 300 N/m) closed on the 9 mm lever presses it with 2.7 N, which
    # a pull slides off; this one presses with 27 N when closed on it.
    gripper = spec.actuator("gripper")
    gripper.gainprm[0], gripper.biasprm[1], gripper.biasprm[2] = GRIPPER_KP, -GRIPPER_KP, -GRIPPER_KV
    site, base = mujoco.mjtObj.mjOBJ_SITE, "arm_base_site"
    for name, kind, obj in ((HINGE_POS_B_SENSOR, mujoco.mjtSensor.mjSENS_FRAMEPOS, door_asset.HINGE_SITE),
                            (HINGE_AXIS_B_SENSOR, mujoco.mjtSensor.mjSENS_FRAMEZAXIS, door_asset.HINGE_SITE)):
        spec.add_sensor(name=name, type=kind, objtype=site, objname=obj, reftype=site, refname=base)
    spec.add_sensor(name=LEVER_B_SENSOR, type=mujoco.mjtSensor.mjSENS_FRAMEYAXIS, objtype=mujoco.mjtObj.mjOBJ_XBODY,
                    objname=door_asset.HANDLE_BODY, reftype=site, refname=base)
    spec.add_sensor(name=PANEL_NORMAL_B_SENSOR, type=mujoco.mjtSensor.mjSENS_FRAMEXAXIS, objtype=mujoco.mjtObj.mjOBJ_XBODY,
                    objname=door_asset.PANEL_BODY, reftype=site, refname=base)
    add_look_at_camera(spec, DOOR_CAMERA, eye=(-0.3, 1.1, 1.4), look=(0.7, -0.05, 0.3))
    # The plinth is drawn only: the door's frame is fixed in space, and nothing drives under it.
    spec.worldbody.add_geom(name="door_plinth", type=mujoco.mjtGeom.mjGEOM_BOX, contype=0, conaffinity=0, group=1,
                            size=[0.06, 0.3, PLINTH_HEIGHT / 2], pos=[DOOR_POS[0] + 0.03, 0.0, PLINTH_HEIGHT / 2],
                            rgba=[0.55, 0.55, 0.6, 1.0])
    return spec


COMMAND_SCALES = {"speed_scale": 1.0, "yaw_rate_scale": 1.0, "position_scale": 0.2, "orientation_scale": 0.5,
                  "anchor": "ee_pose", "orientation_anchor": "ee_pose"}
"""The command layer's scales and tool origin (`WholeBodyCommandAction`): each step moves the tool from where the
policy sees it, by up to 0.2 m and 0.5 rad (`anchor=None, orientation_anchor=None, position_scale=0.6,
orientation_scale=π`: about the stowed pose instead)."""


def whole_body_policy_action(export: str | None = None) -> ActionTermCfg:
    """The commands, executed by the frozen whole-body policy of `WHOLE_BODY_TASK` (its `export` folder)."""
    lower = make_wl_loco_manip_pose_cfg(play=True)
    return ActionTermCfg(cls=WholeBodyPolicyAction, joints=(), params={
        "export": export, "tasks": LOWER_LEVEL_TASKS, "base_command": COMMAND, "ee_command": EE_COMMAND,
        "actions": lower.actions, "observations": lower.observations["policy"]})


def scripted_whole_body_action() -> ActionTermCfg:
    """The commands, executed from exact state (`ScriptedWholeBodyAction`)."""
    return ActionTermCfg(cls=ScriptedWholeBodyAction, joints=(), params={
        "base_command": COMMAND, "ee_command": EE_COMMAND, "legs": wl.LEG_JOINTS, "wheels": wl.WHEEL_JOINTS,
        "arm": ARM_JOINTS, "wheel_radius": wl.WHEEL_RADIUS, "half_track": wl.HALF_TRACK, "base": "arm_base",
        "site": EE_SITE, "damping": IK_DAMPING, "orientation_weight": IK_ORIENTATION_WEIGHT, "iterations": 5,
        "body": wl.BASE_BODY, "upright_kp": 800.0, "upright_kd": 30.0, "upright_max_torque": 200.0})


def perception(play: bool) -> dict:
    """An `ObsTermCfg`'s noise and delay for what perception reports (noisy and late in training, clean in `play`)."""
    return {"noise_std": 0.0 if play else 0.005, "delay_range_steps": (0, 0) if play else (0, 2)}


def command_layer_policy_observations(play: bool, perceived: dict[str, ObsTermCfg]) -> ObsGroupCfg:
    """An upper policy's deployable group: the base's angular velocity and gravity direction, the tool pose and the
    gripper opening, then the task's `perceived` terms, then the last action (corrupted in training, not in `play`)."""
    return ObsGroupCfg(terms={
        "base_ang_vel": ObsTermCfg(func=observations.sensor, params={"name": "imu_gyro"}, noise_std=0.05, scale=0.25),
        "gravity": ObsTermCfg(func=observations.projected_gravity, params={"sensor": "imu_quat"}, noise_std=0.02),
        "ee_pose": ObsTermCfg(func=observations.sensor_pose, noise_std=0.005,
                              params={"name": EE_POSE, "position": EE_SENSOR, "orientation": EE_QUAT_SENSOR}),
        "gripper": ObsTermCfg(func=observations.joint_pos_rel, params={"joints": (GRIPPER_JOINT,)}, noise_std=0.001),
        **perceived,
        "last_action": ObsTermCfg(func=observations.last_action),
    }, enable_corruption=not play)


def door_policy_observations(play: bool) -> ObsGroupCfg:
    """`wl_door`'s deployable group: the handle's position and the door's and handle's angles, perceived."""
    late = perception(play)
    angles = {**late, "noise_std": 4 * late["noise_std"]}
    return command_layer_policy_observations(play, {
        "handle_pos": ObsTermCfg(func=observations.sensor, params={"name": door_asset.HANDLE_POS_B_SENSOR}, **late),
        "door_angle": ObsTermCfg(func=observations.sensor, params={"name": door_asset.ANGLE_SENSOR}, **angles),
        "handle_angle": ObsTermCfg(func=observations.sensor, params={"name": door_asset.HANDLE_ANGLE_SENSOR}, **angles),
    })


def make_command_layer_cfg(play: bool = False, export: str | None = None, scripted: bool = False) -> TaskCfg:
    """What the wheel-legged robot's own tasks share: the scene's robot, its sensors, costs and terminations, the
    commands and the gripper as actions (executed by the trained whole-body policy's `export`, or `scripted`), the
    commands held for as long as the upper level holds them, and the robot's start. A task adds its scene, events,
    rewards, observations, expert and success."""
    cfg = make_wl_loco_manip_pose_cfg(play=True)  # scene sensors, commands, costs, terminations; no curricula
    cfg.num_envs = 16 if play else 512
    cfg.episode_length_s = 15.0
    commands = scripted_whole_body_action() if scripted else whole_body_policy_action(export)
    commands.params.update(COMMAND_SCALES)
    cfg.actions = {"commands": commands,
                   "gripper": ActionTermCfg(cls=JointPositionAction, joints=(GRIPPER_JOINT,), scale=GRIPPER_SCALE)}
    cfg.deploy.held_joints = ()
    cfg.events.pop("arm_stowed", None)
    cfg.events.pop("push", None)
    for command in cfg.commands.values():
        command.resampling_time_range_s = (1e9, 1e9)  # the policy holds them
    cfg.events["reset_base"].params["position_range"].update(x=(-0.05, 0.05), y=(-0.05, 0.05))
    cfg.events["reset_base"].params["orientation_range"]["yaw"] = (-0.2, 0.2)
    cfg.curriculum = {}
    if scripted:
        # Stiff legs and wheels (the scripted level holds the legs still, it does not move them to balance) and the
        # torso held upright (by the scripted level): the robot becomes a differential-drive cart carrying the arm.
        cfg.events["actuator_gains"].params.update(joints=wl.LEG_JOINTS + wl.WHEEL_JOINTS, kp_scale_range=SCRIPTED_GAIN_SCALE,
                                                   kd_scale_range=SCRIPTED_GAIN_SCALE, strength_range=(1.0, 1.0))
    return cfg


def make_wl_door_cfg(play: bool = False, export: str | None = None, scripted: bool = False) -> TaskCfg:
    """`wl_door` over the trained whole-body policy's `export` (or `scripted`)."""
    cfg = make_command_layer_cfg(play, export, scripted)
    cfg.scene.build = make_wl_door_scene_spec
    cfg.scene.camera = DOOR_CAMERA
    cfg.events["door"] = EventTermCfg(
        func=events.RandomizeDoor, mode="reset",
        params={"x_range": (-0.1, 0.1), "y_range": (-0.08, 0.08), "yaw_range": (-0.2, 0.2), "width_scale": (0.85, 1.0),
                "mass_range": (0.8, 2.5), "stiffness_scale": (0.5, 1.5), "damping_scale": (0.5, 2.0),
                "friction_scale": (0.5, 2.0), "handle_friction_range": (0.5, 1.2), "handle_stiffness_scale": (0.7, 1.3)})
    handle = {"handle_sensor": door_asset.HANDLE_POS_W_SENSOR, "ee_sensor": "ee_pos_w"}
    opened = {"joint": door_asset.HINGE_JOINT, "angle": OPEN_ANGLE}
    cfg.rewards = {
        "reach": RewardTermCfg(func=door.reach_handle_tanh, params={**handle, "std": 0.1}, weight=1.0),
        "open": RewardTermCfg(func=door.door_open_progress, params=opened, weight=8.0),
        "opened": RewardTermCfg(func=door.door_opened_in_hand, params={**opened, **handle, "radius": HOLD_RADIUS},
                                weight=8.0),
        "action_rate": RewardTermCfg(func=regularizers.action_rate_l2, weight=-0.01),
    }
    cfg.observations = {
        "policy": door_policy_observations(play),
        "privileged": ObsGroupCfg(terms={
            "door_joint_pos": ObsTermCfg(func=observations.joint_pos_rel, params={"joints": door_asset.DOOR_JOINTS}),
            "door_joint_vel": ObsTermCfg(func=observations.joint_vel, params={"joints": door_asset.DOOR_JOINTS}, scale=0.2),
            "ee_to_handle": ObsTermCfg(func=observations.sensor_offset,
                                       params={"target": door_asset.HANDLE_POS_W_SENSOR, "origin": "ee_pos_w"}),
            "door_physics": ObsTermCfg(func=observations.door_physics, params={"event": "door"}),
        }, privileged=True),
    }
    cfg.expert = TermCfg(func=DoorOpenerExpert, params={"sensors": {
        "tool": EE_SENSOR, "tool_quat": EE_QUAT_SENSOR, "handle": door_asset.HANDLE_POS_B_SENSOR, "normal": PANEL_NORMAL_B_SENSOR,
        "lever": LEVER_B_SENSOR, "hinge": HINGE_POS_B_SENSOR, "axis": HINGE_AXIS_B_SENSOR,
        "door_angle": door_asset.ANGLE_SENSOR, "handle_angle": door_asset.HANDLE_ANGLE_SENSOR}})
    cfg.success = TermCfg(func=door.DoorPulledOpen, params={**opened, **handle, "radius": HOLD_RADIUS})
    return cfg


def make_wl_door_scripted_cfg(play: bool = False) -> TaskCfg:
    """`wl_door` with the scripted stand-in for the whole-body policy (`ScriptedWholeBodyAction`): for the expert, for
    tests, and for an upper policy to learn from before it runs over the trained whole-body policy (same actions and
    observations)."""
    return make_wl_door_cfg(play, scripted=True)


def make_command_layer_agent_cfg(experiment: str = "wl_door") -> RunnerCfg:
    """PPO over the commands; actor and critic read the deployable and the privileged groups (a teacher)."""
    groups = ["policy", "privileged"]
    return ppo_agent_cfg(experiment, ITERATIONS, hidden_dims=(256, 128, 64),
                         obs_groups={"actor": list(groups), "critic": list(groups), "student": ["policy"]}, gamma=0.99)


register("wl_door", make_wl_door_cfg, make_command_layer_agent_cfg,
         "wheel-legged robot with arm opens a latched door: commands to a frozen whole-body policy (export=...)")
register("wl_door_scripted", make_wl_door_scripted_cfg, make_command_layer_agent_cfg,
         "wl_door with a scripted lower level and the torso held upright (privileged: experts and tests)",
         same_policy_as="wl_door")
