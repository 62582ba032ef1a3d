# SPDX-License-Identifier: BSD-3-Clause
"""What the privileged arm6 tasks (`arm_lift`, `arm_push_grasp`, `arm_door`) share: the action space
with the gripper, the privilege schedule, the play variant and the teacher's training config."""

from __future__ import annotations

from batonlab.actions import JointPositionAction
from batonlab.curricula.privilege import PrivilegeSchedule
from batonlab.env.cfg import ActionTermCfg, CurriculumTermCfg, TaskCfg
from batonlab.rl.cfg import AlgorithmCfg, PolicyCfg, RunnerCfg
from batonlab.robots.arm6 import ARM_JOINTS, GRIPPER_JOINT

JOINTS = (*ARM_JOINTS, GRIPPER_JOINT)
"""The joints the grasping policies observe and drive."""


def arm_and_gripper_actions() -> dict[str, ActionTermCfg]:
    """Arm joint positions (scale 0.5 rad) and the gripper: zero action holds it half open (home: 0.02 m
    per finger); ±1 opens or closes it fully."""
    return {
        "arm": ActionTermCfg(cls=JointPositionAction, joints=ARM_JOINTS, scale=0.5),
        "gripper": ActionTermCfg(cls=JointPositionAction, joints=(GRIPPER_JOINT,), scale=0.02),
    }


def privilege_schedule() -> dict[str, CurriculumTermCfg]:
    """λ steps down by 0.25 each time 75 % of the last 1024 episodes succeed."""
    return {"privilege": CurriculumTermCfg(func=PrivilegeSchedule, params={"success_threshold": 0.75, "window_episodes": 1024})}


def as_play(cfg: TaskCfg) -> TaskCfg:
    """The evaluation variant: 16 envs, no privileges (λ = 0), no schedule."""
    cfg.num_envs = 16
    cfg.privilege_level = 0.0
    cfg.curriculum = {}
    return cfg


def teacher_agent_cfg(experiment_name: str, max_iterations: int, gamma: float) -> RunnerCfg:
    """PPO whose actor and critic read the deployable and the privileged groups (the teacher)."""
    return RunnerCfg(
        experiment_name=experiment_name,
        num_steps_per_env=24,
        max_iterations=max_iterations,
        save_interval=50,
        obs_groups={"actor": ["policy", "privileged"], "critic": ["policy", "privileged"]},
        policy=PolicyCfg(actor_hidden_dims=(256, 128, 64), critic_hidden_dims=(256, 128, 64), init_noise_std=1.0),
        algorithm=AlgorithmCfg(learning_rate=1e-3, entropy_coef=0.005, num_mini_batches=4, gamma=gamma),
    )
