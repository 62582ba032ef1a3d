# SPDX-License-Identifier: BSD-3-Clause
"""`reach`: any table-mounted arm brings its end effector to a commanded position.

The `arm_reach` recipe (observations, rewards, randomisation, success within 3 cm, the agent's
settings) over the arm of a robot description (`batonlab.robots.description`): select it with
`batonlab train task=reach robot=path/to/robot.yaml`; without `robot=` it is arm6
(`assets/arm6/arm6.yaml`), and then the same task as `arm_reach`. The robot needs a fixed base and an
`ee_site`; its position-controlled joints are the actions, in the description's order, except its
`held_joints` (fingers), which hold their default position (`hold_pose` event, `deploy.held_joints`).

The workspace box is where targets are drawn, in the robot's base frame [m]: the params `x_range`,
`y_range` and `z_range` of the `ee_target` command. The default, `arm_reach`'s box, suits arms of
arm6's size (about 0.7 m from the shoulder to the tool, shoulder 0.16 m above the table). For an arm
of another size, set a box inside its reach (scaling each range by the ratio of the arms' lengths is a
good start), on the command line::

    batonlab train task=reach robot=my_arm.yaml env.commands.ee_target.params.x_range=[0.15,0.35] \\
        env.commands.ee_target.params.y_range=[-0.2,0.2] env.commands.ee_target.params.z_range=[0.05,0.3]

A run folder records the robot, so play and export rebuild it; `env.` overrides are not recorded, so
give them again to play and export. For a box that travels everywhere, the sim robot of
`batonlab deploy --sim` included, write a task factory and name it as the task::

    from batonlab.tasks.reach import make_reach_agent_cfg as make_my_reach_agent_cfg, make_reach_cfg

    def make_my_reach_cfg(play: bool = False):      # in my_pkg/my_reach.py, installed or on PYTHONPATH
        cfg = make_reach_cfg(play=play, robot="/path/to/my_arm.yaml")
        cfg.commands["ee_target"].params.update(x_range=(0.15, 0.35), y_range=(-0.2, 0.2), z_range=(0.05, 0.3))
        return cfg

    batonlab train task=my_pkg.my_reach:make_my_reach_cfg
"""

from __future__ import annotations

from pathlib import Path

import mujoco

from batonlab import events
from batonlab.env.cfg import EventTermCfg, SceneCfg, TaskCfg
from batonlab.rl.cfg import RunnerCfg
from batonlab.robots.assets import asset_path
from batonlab.robots.description import RobotDescription, RobotDescriptionError
from batonlab.robots.loader import as_description, default_joint_pos
from batonlab.tasks import SuccessBar, register
from batonlab.tasks.agents import variant_agent_cfg
from batonlab.tasks.arm_reach import make_arm_reach_agent_cfg, make_arm_reach_cfg
from batonlab.tasks.table_scene import make_table_robot_spec


def default_robot() -> Path:
    """The robot of `reach` without `robot=`: arm6's description."""
    return asset_path("arm6", "arm6.yaml")


def make_reach_cfg(play: bool = False, robot: str | Path | None = None) -> TaskCfg:
    """Any table-mounted arm (robot=ROBOT.yaml, default arm6) reaches a commanded position.

    Args:
        play: The evaluation variant (no observation noise, 16 envs).
        robot: A robot description YAML (relative paths from the working directory); None: arm6.

    Raises:
        FileNotFoundError: the description, its model file or a mesh is missing.
        RobotDescriptionError: the description is invalid, or the robot cannot reach (no `ee_site`,
            a floating base, no position-controlled joint).
    """
    path = Path(robot).resolve() if robot is not None else default_robot()
    description = as_description(path)
    joints = reach_joints(description)
    cfg = make_arm_reach_cfg(play=play)
    cfg.scene = SceneCfg(build=_scene_builder(path, description), default_joint_pos=default_joint_pos(description),
                         camera="overview")
    # Every term of the recipe that names joints names the arm's: actions, observations, rewards, events.
    for group in (cfg.actions, cfg.rewards, cfg.events):
        for term in group.values():
            if getattr(term, "joints", None):
                term.joints = joints
            if "joints" in getattr(term, "params", {}):
                term.params["joints"] = joints
    for obs_group in cfg.observations.values():
        for term in obs_group.terms.values():
            if "joints" in term.params:
                term.params["joints"] = joints
    if description.held_joints:
        cfg.deploy.held_joints = description.held_joints
        cfg.events["hold_pose"] = EventTermCfg(func=events.hold_default_pose, mode="reset",
                                               params={"joints": description.held_joints})
    return cfg


def make_reach_agent_cfg() -> RunnerCfg:
    return variant_agent_cfg(make_arm_reach_agent_cfg, "reach")


def reach_joints(description: RobotDescription) -> tuple[str, ...]:
    """The joints a reach policy drives: the description's position-controlled ones that are not held, in its order.

    Raises:
        RobotDescriptionError: the robot has no end effector, a floating base or no position-controlled joint.
    """
    where = f"task reach: robot '{description.name}' ({description.model})"
    if not description.ee_site:
        raise RobotDescriptionError(f"{where} has no end effector: set `ee_site` (a site or body) in its description")
    if description.base != "fixed":
        raise RobotDescriptionError(f"{where} has a {description.base} base; reach mounts an arm on a table (base: fixed)")
    joints = tuple(n for n in description.policy_joint_names if description.joint(n).control == "position")
    if not joints:
        raise RobotDescriptionError(f"{where} has no position-controlled joint to act on")
    return joints


def _scene_builder(path: Path, description: RobotDescription):
    """`SceneCfg.build` of the robot on the table; its name in a run's config.yaml names the description file
    (by its name only: config.yaml's `robot_sha256` says which files, and a run moves to other folders)."""

    def build() -> mujoco.MjSpec:
        return make_table_robot_spec(description)

    build.__qualname__ = f"make_table_robot_spec(robot={path.name})"
    return build


register("reach", make_reach_cfg, make_reach_agent_cfg, "any table-mounted arm (robot=ROBOT.yaml, default arm6) "
         "reaches a commanded position", success_bar=SuccessBar(0.9, max_iterations=300))
