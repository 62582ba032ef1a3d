# SPDX-License-Identifier: BSD-3-Clause
"""`arm_lift` learns on the CPU with its privileges on: a short training at λ = 1 grasps and lifts the
cube in most play episodes at λ = 1 (the session fixture `arm_lift_teacher`); a deployable student
distilled from it by DAgger (β-mixed rollouts, history observations) learns to lift like it."""

from __future__ import annotations

import pytest
from privileged_training import distillation_agent, evaluate_at_level

from batonlab.env.env import BatonEnv
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_task_cfg

DISTILL_ITERATIONS = 30
"""DAgger updates of the student (256 envs × 24 steps each: 0.18M env steps)."""


@pytest.mark.slow
def test_arm_lift_learns_at_full_privilege(arm_lift_teacher):
    helped = evaluate_at_level("arm_lift", arm_lift_teacher.policy, privilege_level=1.0)
    unhelped = evaluate_at_level("arm_lift", arm_lift_teacher.policy, privilege_level=0.0)
    print(f"\n[arm_lift] after {arm_lift_teacher.env_steps / 1e6:.2f}M env steps at λ = 1: success "
          f"{helped.success_rate:.2f} at λ = 1, {unhelped.success_rate:.2f} at λ = 0")
    assert helped.success_rate >= 0.7


@pytest.mark.slow
def test_a_dagger_student_lifts_like_its_teacher(arm_lift_teacher):
    """The student reads only the deployable `student` group (3 frames of history), acts in its own rollouts
    (the teacher's action executed with probability β, 0.5 falling to 0 over 10 updates) and is labelled by
    the teacher; at the teacher's λ it reaches most of the teacher's success."""
    cfg = make_task_cfg("arm_lift")
    cfg.num_envs, cfg.seed, cfg.privilege_level, cfg.curriculum = 256, 1, arm_lift_teacher.privilege_level, {}
    agent = distillation_agent("arm_lift", arm_lift_teacher.run_dir, arm_lift_teacher.checkpoint)
    agent.obs_groups = {**agent.obs_groups, "student": ["student"]}
    agent.algorithm.distillation.teacher_action_prob = 0.5
    agent.algorithm.distillation.teacher_action_iterations = 10
    runner = BatonRunner(RslRlVecEnv(BatonEnv(cfg)), agent)
    runner.load_teacher(agent.teacher.checkpoint)
    losses = []
    runner.learn(DISTILL_ITERATIONS, progress=False, on_iteration=lambda _, stats: losses.append(stats["Loss/behavior"]))
    level = arm_lift_teacher.privilege_level
    student = evaluate_at_level("arm_lift", runner.inference_policy(), privilege_level=level)
    teacher = evaluate_at_level("arm_lift", arm_lift_teacher.policy, privilege_level=level)
    print(f"\n[arm_lift] DAgger student after {DISTILL_ITERATIONS} updates: behaviour loss {losses[0]:.3f} -> "
          f"{losses[-1]:.3f}; success at λ = {level:g}: student {student.success_rate:.2f}, teacher {teacher.success_rate:.2f}")
    assert losses[-1] < 0.2 * losses[0]
    assert student.success_rate >= 0.8 * teacher.success_rate
