# SPDX-License-Identifier: BSD-3-Clause
"""What the privileged arm6 tasks (`arm_lift`, `arm_push_grasp`, `arm_door`) share: the action space
with the gripper, the privilege schedule, the play variant and the teacher's training config."""

from __future__ import annotations

import dataclasses

from batonlab.actions import JointPositionAction, ToolStepAction
from batonlab.curricula.privilege import PrivilegeSchedule
from batonlab import events, observations
from batonlab.env.cfg import ActionTermCfg, CurriculumTermCfg, EventTermCfg, ObsGroupCfg, ObsTermCfg, SimCfg, TaskCfg
from batonlab.rl.cfg import RunnerCfg
from batonlab.robots.arm6 import ARM_JOINTS, EE_SITE, GRIPPER_JOINT
from batonlab.tasks.agents import ROLLOUT_STEPS, ppo_agent_cfg

JOINTS = (*ARM_JOINTS, GRIPPER_JOINT)
"""The joints the grasping policies observe and drive."""


ARM_TARGET_RATE = 3.0
"""The arm's targets move at most this fast in training [rad/s]: the robot's rate limit (policy_node's default
`max_joint_velocity`), so that the deployed policy is never throttled beyond what it trained with."""


def arm_and_gripper_actions() -> dict[str, ActionTermCfg]:
    """Arm joint positions (scale 0.5 rad, under the robot's command filter at `ARM_TARGET_RATE`) and the gripper:
    zero action holds it half open (home: 0.02 m per finger); ±1 opens or closes it fully."""
    return {
        "arm": ActionTermCfg(cls=JointPositionAction, joints=ARM_JOINTS, scale=0.5, max_target_rate=ARM_TARGET_RATE),
        "gripper": ActionTermCfg(cls=JointPositionAction, joints=(GRIPPER_JOINT,), scale=0.02),
    }


def tool_step_arm_action() -> ActionTermCfg:
    """The arm driven by steps of its tool (`ToolStepAction`: 6 actions, DLS IK), under the same command filter."""
    return ActionTermCfg(cls=ToolStepAction, joints=ARM_JOINTS, max_target_rate=ARM_TARGET_RATE,
                         params={"base": "arm_base", "site": EE_SITE})


def arm_policy_terms(joints: tuple[str, ...]) -> dict[str, ObsTermCfg]:
    """The deployable terms every grasping policy starts with: joint positions and velocities, the tool point."""
    return {
        "joint_pos": ObsTermCfg(func=observations.joint_pos_rel, params={"joints": joints}, noise_std=0.01),
        "joint_vel": ObsTermCfg(func=observations.joint_vel, params={"joints": joints}, noise_std=0.05, scale=0.1),
        "ee_pos": ObsTermCfg(func=observations.sensor, params={"name": "ee_pos_b"}, noise_std=0.005),
    }


STUDENT_HISTORY = 3
"""Frames (the current and the latest past ones) of every deployable term in the `student` group (contact leaves its trace in how the
gripper and the object pose move over a few steps)."""

FADE_FRACTION = 0.6
"""Fraction of a grasping task's training iterations by which its privileges are gone (the rest trains at λ = 0)."""


def grasping_task_cfg(play: bool, iterations: int, **fields) -> TaskCfg:
    """A privileged arm6 task: 1024 envs at 50 Hz, arm and gripper actions, λ from 1 down by `privilege_schedule`
    to 0 by `FADE_FRACTION` of its `iterations`; `fields` are the task's own (`TaskCfg` keywords); `play`: `as_play`."""
    cfg = TaskCfg(sim=SimCfg(physics_dt=0.005, decimation=4), num_envs=1024, actions=arm_and_gripper_actions(),
                  privilege_level=1.0, curriculum=privilege_schedule(iterations), **fields)
    cfg.observations["student"] = history_group(cfg.observations["policy"], STUDENT_HISTORY)
    return as_play(cfg) if play else cfg


def history_group(group: ObsGroupCfg, frames: int) -> ObsGroupCfg:
    """A copy of a deployable group stacking `frames` frames of every term (a history student's inputs)."""
    terms = {name: dataclasses.replace(term, history_length=frames) for name, term in group.terms.items()}
    return dataclasses.replace(group, terms=terms)


def initial_arm_pose(position_range: tuple[float, float]) -> EventTermCfg:
    """Reset event: the arm starts at its home pose offset by U(position_range) per joint [rad]."""
    return EventTermCfg(func=events.reset_joints_uniform, mode="reset",
                        params={"joints": ARM_JOINTS, "position_range": position_range})


def privilege_schedule(iterations: int) -> dict[str, CurriculumTermCfg]:
    """λ steps down by 0.25 each time 75 % of the last 1024 episodes succeed (halved after a step that cost
    success, down to 1/16), and is 0 by `FADE_FRACTION` of a training of `iterations` whatever the success."""
    zero_by_iteration = round(FADE_FRACTION * iterations)
    return {"privilege": CurriculumTermCfg(func=PrivilegeSchedule, params={
        "success_threshold": 0.75, "window_episodes": 1024, "step": 0.25, "min_step": 0.0625,
        "zero_by_step": zero_by_iteration * ROLLOUT_STEPS})}


def as_play(cfg: TaskCfg) -> TaskCfg:
    """The evaluation variant: 16 envs, no privileges (λ = 0), no schedule."""
    cfg.num_envs = 16
    cfg.privilege_level = 0.0
    cfg.curriculum = {}
    return cfg


def teacher_agent_cfg(experiment_name: str, max_iterations: int, gamma: float) -> RunnerCfg:
    """PPO whose actor and critic read the deployable and the privileged groups (the teacher); a distilled
    student reads `policy` (`agent.obs_groups.student=[student]`: the history group)."""
    groups = ["policy", "privileged"]
    return ppo_agent_cfg(experiment_name, max_iterations, hidden_dims=(256, 128, 64),
                         obs_groups={"actor": list(groups), "critic": list(groups), "student": ["policy"]}, gamma=gamma)
