# SPDX-License-Identifier: BSD-3-Clause
"""A task's scripted expert: it solves arm_push_grasp at λ = 0, and as Distillation's teacher (`teacher=expert`)
it labels a student that learns to act like it, through the CLI's train, resume, play and fine-tune (also with
tool-step arm actions, `arm_push_grasp_tool`, whose export the robot runs)."""

from __future__ import annotations

import torch

from batonlab.cli.main import main
from batonlab.env.terms import build_term
from batonlab.rl import checkpoint
from batonlab.rl.cfg import TeacherCfg
from batonlab.rl.expert_teacher import EXPERT_GROUP, expert_observations
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_agent_cfg
from conftest import make_env

TINY = ["env.num_envs=16", "agent.num_steps_per_env=8", "progress=false", "eval_episodes=0"]
DISTIL_FROM_EXPERT = ["agent.algorithm.class_name=Distillation", "teacher=expert"]


def test_the_push_grasp_expert_pushes_pinches_and_lifts_the_box_at_level_zero():
    """No privilege on: the box is pushed over the edge, pinched by its overhang and lifted in most episodes."""
    env = make_env("arm_push_grasp", 32, seed=5, play=True)
    assert env.privilege_manager.level == 0.0
    expert = build_term(env.cfg.expert.func, env.cfg.expert.params, env, "expert")
    env.reset()
    expert.reset(env.all_env_ids)
    success = env.cfg.success
    lifted = torch.zeros(env.num_envs, dtype=torch.bool)
    for _ in range(env.max_episode_length - 1):
        env.step(expert(env))
        held = success.func(env, **success.params).bool()
        lifted |= held
    print(f"\n[expert] arm_push_grasp: {lifted.float().mean():.2f} of 32 episodes lifted at λ = 0, "
          f"{held.float().mean():.2f} still held at the last step")
    assert lifted.float().mean() >= 0.5 and held.float().mean() >= 0.5
    env.close()


def test_a_student_distilled_from_the_expert_trains_resumes_plays_and_finetunes(tmp_path, capsys):
    args = ["train", "task=arm_push_grasp", f"log_root={tmp_path}", *TINY]
    assert main([*args, *DISTIL_FROM_EXPERT, "max_iterations=2"]) == 0
    assert "from the task's scripted expert (observation groups ['expert'])" in capsys.readouterr().out
    (run,) = (tmp_path / "arm_push_grasp").iterdir()
    state = checkpoint.load(run / "model_2.pt")
    assert state["teacher_cfg"]["expert"] and state["teacher_cfg"]["checkpoint"] is None
    assert state["teacher_state_dict"] == {} and state["student_obs_groups"] == ["policy"]
    assert main([*args, "agent.algorithm.class_name=Distillation", "max_iterations=3", "resume=true",
                 f"run_dir={run}"]) == 0
    assert main(["play", f"run_dir={run}", "play.num_episodes=1", "play.video=false", "progress=false"]) == 0
    assert "using its student" in capsys.readouterr().out
    assert_finetunes("arm_push_grasp", run, tmp_path / "tuned", capsys)

    assert main(["train", "task=arm_lift", f"log_root={tmp_path}", *TINY, *DISTIL_FROM_EXPERT]) != 0
    assert "task 'arm_lift' has no scripted expert" in capsys.readouterr().err


def test_a_tool_step_student_of_the_expert_trains_and_finetunes(tmp_path, capsys):
    # keep_best on a distillation run keeps its best student (DAgger's success swings), which a fine-tune starts from.
    assert main(["train", "task=arm_push_grasp_tool", f"log_root={tmp_path}", *TINY[:-1], *DISTIL_FROM_EXPERT,
                 "max_iterations=2", "keep_best=true", "eval_interval=1", "eval_episodes=2"]) == 0
    (run,) = (tmp_path / "arm_push_grasp_tool").iterdir()
    best = checkpoint.load(run / "model_best.pt")
    assert best["iter"] in (1, 2) and "play_evaluation" in best
    assert best["student_state_dict"]["mlp.6.weight"].shape[0] == 7  # 6 tool steps + gripper
    assert_finetunes("arm_push_grasp_tool", run / "model_best.pt", tmp_path / "tuned", capsys, noise_std=0.02)
    assert main(["train", "task=arm_push_grasp_tool", f"log_root={tmp_path / 'refused'}", *TINY, f"finetune={run}",
                 "agent.policy.init_noise_std=0"]) != 0
    assert "agent.policy.init_noise_std=0.0 must be > 0" in capsys.readouterr().err


def assert_finetunes(task: str, student, log_root, capsys, noise_std: float | None = None) -> None:
    """PPO fine-tunes the expert's student (a run folder: its newest checkpoint; or a checkpoint) for one iteration
    (a fresh critic: the expert has none), from the student's rollout noise (0.1) or from `noise_std` given as
    `agent.policy.init_noise_std`."""
    noise = [] if noise_std is None else [f"agent.policy.init_noise_std={noise_std}"]
    assert main(["train", f"task={task}", f"log_root={log_root}", *TINY, f"finetune={student}",
                 "max_iterations=1", *noise]) == 0
    out = capsys.readouterr().out
    assert "critic: fresh" in out
    assert f"noise std {0.1 if noise_std is None else noise_std:.3g})" in out, out
    (tuned_run,) = (log_root / task).iterdir()
    assert checkpoint.load(tuned_run / "model_1.pt")["finetuned_from"]
    # The student's weights fit its normaliser's statistics: a fine-tune, resumed too, never moves them (a moving
    # normaliser took a push-grasp student from 0.48 to 0.00 with its weights held).
    assert main(["train", f"task={task}", f"log_root={log_root}", *TINY, "resume=true", f"run_dir={tuned_run}",
                 "max_iterations=2"]) == 0
    student_checkpoint = student if student.is_file() else checkpoint.checkpoints(student)[0]
    student = checkpoint.load(student_checkpoint)["student_state_dict"]
    tuned = checkpoint.load(tuned_run / "model_2.pt")["actor_state_dict"]
    for buffer in ("_mean", "_var", "count"):
        assert torch.equal(tuned[f"obs_normalizer.{buffer}"], student[f"obs_normalizer.{buffer}"]), buffer


def test_the_student_learns_the_experts_actions():
    """DAgger on the expert's labels: the behaviour loss on a fixed batch of expert-visited states falls."""
    torch.manual_seed(0)
    env = make_env("arm_push_grasp", 16, seed=0, privilege_level=0.0,
                   edit=lambda cfg: cfg.observations.update({EXPERT_GROUP: expert_observations(cfg.expert)}))
    agent = make_agent_cfg("arm_push_grasp")
    agent.algorithm.class_name, agent.num_steps_per_env = "Distillation", 16
    agent.teacher = TeacherCfg(obs_groups=[EXPERT_GROUP], expert=True)
    agent.algorithm.distillation.teacher_action_prob, agent.algorithm.distillation.teacher_action_iterations = 0.5, 3
    vec_env = RslRlVecEnv(env)
    runner = BatonRunner(vec_env, agent)
    frames = []
    with torch.inference_mode():
        obs = vec_env.get_observations()
        for _ in range(12):
            frames.append(obs.clone())
            obs, _, _, _ = vec_env.step(obs[EXPERT_GROUP])
    batch = torch.cat(frames)

    def behaviour_loss() -> float:
        with torch.inference_mode():
            return torch.nn.functional.mse_loss(runner.alg.student(batch), batch[EXPERT_GROUP]).item()

    before = behaviour_loss()
    runner.learn(8, progress=False)
    after = behaviour_loss()
    print(f"\n[expert teacher] fixed-batch behaviour loss {before:.4f} -> {after:.4f}")
    assert after < 0.3 * before

