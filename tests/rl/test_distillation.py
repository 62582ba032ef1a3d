# SPDX-License-Identifier: BSD-3-Clause
"""Teacher–student distillation with rsl-rl's Distillation: the CLI, checkpoints, export and imitation.

The teacher is a real (tiny) PPO run of arm_lift whose actor reads the privileged group; the
student reads the deployable `policy` group only and is exported.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
import yaml

from batonlab.cli.finetune import FINETUNE_LEARNING_RATE
from batonlab.cli.main import main
from batonlab.deploy import load_manifest
from batonlab.env.env import BatonEnv
from batonlab.rl import checkpoint
from batonlab.rl.distillation import restore_distillation_cfg
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_agent_cfg
from conftest import make_env
from privileged_training import distillation_agent

TINY = ["env.num_envs=32", "agent.num_steps_per_env=8", "progress=false", "eval_episodes=0"]
DISTIL = "agent.algorithm.class_name=Distillation"
DEPLOYABLE_ACTIONS = 7
"""arm_lift's robot actions: six arm joints and the gripper."""


def _only_run(root: Path, task: str = "arm_lift") -> Path:
    (run,) = (root / task).iterdir()
    return run


@pytest.fixture(scope="module")
def teacher_run(tmp_path_factory) -> Path:
    """A PPO run of arm_lift (the default agent: actor and critic read `policy` and `privileged`)."""
    root = tmp_path_factory.mktemp("teacher")
    assert main(["train", "task=arm_lift", "max_iterations=2", f"log_root={root}", *TINY]) == 0
    return _only_run(root)


def _teacher_agent(teacher_run: Path):
    """arm_lift's agent set to distil the teacher of `teacher_run` (as `teacher=RUN_DIR` sets it)."""
    agent = distillation_agent("arm_lift", teacher_run, teacher_run / "model_2.pt")
    agent.num_steps_per_env = 8
    return agent


def _env(num_envs: int = 32, play: bool = False) -> BatonEnv:
    return make_env("arm_lift", num_envs, seed=0, play=play)


def test_distil_resume_play_export(teacher_run, tmp_path, capsys):
    distil = ["train", "task=arm_lift", DISTIL, f"log_root={tmp_path}", "agent.save_interval=1", *TINY]
    assert main([*distil, "max_iterations=2", f"teacher={teacher_run}"]) == 0
    out = capsys.readouterr().out
    assert "distilling a student (observation groups ['policy'])" in out and str(teacher_run / "model_2.pt") in out
    assert "distilling at λ = 0 (privileges off, curriculum ['privilege'] dropped)" in out
    run = _only_run(tmp_path)

    # The checkpoint: student, teacher, optimizer, curriculum, algorithm name and what rebuilds them.
    state = checkpoint.load(run / "model_2.pt")
    assert state["algorithm"] == "Distillation" and state["iter"] == 2
    assert {"student_state_dict", "teacher_state_dict", "optimizer_state_dict", "curriculum"} <= set(state)
    assert "actor_state_dict" not in state and "privilege" not in state["curriculum"]  # the student learns at λ = 0
    assert state["student_obs_groups"] == ["policy"]
    assert state["teacher_cfg"]["checkpoint"] == str(teacher_run / "model_2.pt")
    assert list(state["teacher_cfg"]["obs_groups"]) == ["policy", "privileged"]
    teacher_actor = checkpoint.load(teacher_run / "model_2.pt")["actor_state_dict"]
    for name, tensor in teacher_actor.items():  # the teacher is the teacher run's actor, and it is not trained
        assert torch.equal(state["teacher_state_dict"][name], tensor), name
    first = checkpoint.load(run / "model_1.pt")["student_state_dict"]
    assert not torch.equal(first["mlp.0.weight"], state["student_state_dict"]["mlp.0.weight"])  # the student learns

    # Resuming needs no teacher=: the checkpoint holds it.
    assert main([*distil, "max_iterations=3", "resume=true", f"run_dir={run}"]) == 0
    assert "resuming" in capsys.readouterr().out
    resumed = checkpoint.load(run / "model_3.pt")
    assert resumed["iter"] == 3 and torch.equal(resumed["teacher_state_dict"]["mlp.0.weight"], teacher_actor["mlp.0.weight"])

    # Play and export use the student, at λ = 0, and say so.
    assert main(["play", f"run_dir={run}", "play.num_episodes=2", "play.video=false", "progress=false"]) == 0
    out = capsys.readouterr().out
    assert "using its student" in out and "privileges off (λ = 0)" in out
    assert (run / "play" / "metrics.json").is_file()
    assert main(["export", f"run_dir={run}"]) == 0
    out = capsys.readouterr().out
    assert "using its student" in out and "privileges off (λ = 0)" in out

    # The export reads the `policy` group only and returns the deployable actions, as the student computes them.
    manifest = load_manifest(run / "exported")
    env = _env(num_envs=1, play=True)
    assert manifest.obs_group == "policy" and manifest.obs_dim == env.observation_manager.group_dim("policy")
    assert manifest.action_dim == DEPLOYABLE_ACTIONS == env.num_actions - env.action_manager.privileged_dim
    session = ort.InferenceSession(str(run / "exported" / "policy.onnx"), providers=["CPUExecutionProvider"])
    assert session.get_inputs()[0].shape[1] == manifest.obs_dim and session.get_outputs()[0].shape[1] == DEPLOYABLE_ACTIONS
    agent = make_agent_cfg("arm_lift")
    assert restore_distillation_cfg(agent, resumed)
    runner = BatonRunner(RslRlVecEnv(env), agent)
    runner.load(run / "model_3.pt", load_optimizer=False)
    obs = env.obs
    (action,) = session.run([manifest.output_name], {manifest.input_name: obs["policy"].numpy()})
    with torch.inference_mode():
        expected = runner.inference_policy()(obs)[:, :DEPLOYABLE_ACTIONS].numpy()
    np.testing.assert_allclose(action, expected, atol=1e-5)
    env.close()


def test_finetune_starts_ppo_from_the_student_and_the_teachers_critic(teacher_run, tmp_path, capsys):
    """`finetune=` a distillation run: a PPO run at λ = 0 whose actor is the student (groups, weights,
    normaliser, its rollout std) and whose critic is the teacher's; it trains, plays and resumes."""
    student_root, tuned_root = tmp_path / "student", tmp_path / "tuned"
    assert main(["train", "task=arm_lift", DISTIL, "max_iterations=2", f"log_root={student_root}",
                 f"teacher={teacher_run}", *TINY]) == 0
    student_run = _only_run(student_root)
    capsys.readouterr()
    assert main(["train", "task=arm_lift", "max_iterations=1", f"log_root={tuned_root}", f"finetune={student_run}",
                 "agent.algorithm.learning_rate=1e-12", "agent.algorithm.num_learning_epochs=1", *TINY]) == 0
    out = capsys.readouterr().out
    assert "fine-tuning the student at λ = 0 (privileges off, curriculum ['privilege'] dropped)" in out
    assert f"critic: the teacher's ({teacher_run / 'model_2.pt'})" in out
    tuned_run = _only_run(tuned_root)
    student = checkpoint.load(student_run / "model_2.pt")["student_state_dict"]
    tuned = checkpoint.load(tuned_run / "model_1.pt")
    teacher = checkpoint.load(teacher_run / "model_2.pt")
    assert tuned["algorithm"] == "PPO"
    assert tuned["actor_state_dict"].keys() == student.keys()
    for name in ("mlp.0.weight", "distribution.std_param"):  # a learning rate of 1e-12 leaves the start
        torch.testing.assert_close(tuned["actor_state_dict"][name], student[name], atol=1e-6, rtol=0)
    assert float(tuned["actor_state_dict"]["distribution.std_param"].mean()) == pytest.approx(0.1, abs=1e-4)
    torch.testing.assert_close(tuned["critic_state_dict"]["mlp.0.weight"], teacher["critic_state_dict"]["mlp.0.weight"],
                               atol=1e-6, rtol=0)
    saved = yaml.safe_load((tuned_run / "config.yaml").read_text())
    assert saved["agent"]["obs_groups"]["actor"] == ["policy"] and saved["env"]["privilege_level"] == 0.0
    assert main(["export", f"run_dir={tuned_run}", f"export.out_dir={tmp_path / 'export'}", "progress=false"]) == 0
    capsys.readouterr()
    assert main(["train", "task=arm_lift", "resume=true", f"run_dir={tuned_run}", "max_iterations=2", *TINY]) == 0
    assert "fine-tuning the student at λ = 0" in capsys.readouterr().out  # a resume stays without help
    resumed = checkpoint.load(tuned_run / "model_2.pt")
    assert resumed["finetuned_from"] == str(student_run / "model_2.pt") and "privilege" not in resumed.get("curriculum", {})
    # Without a learning rate the adaptive schedule starts at its floor (a trained student moves little at first).
    assert main(["train", "task=arm_lift", "max_iterations=1", f"log_root={tmp_path / 'floor'}",
                 f"finetune={student_run}", "agent.algorithm.num_learning_epochs=1", *TINY]) == 0
    assert "the adaptive learning rate starts at 1e-05" in capsys.readouterr().out
    floor = yaml.safe_load((_only_run(tmp_path / "floor") / "config.yaml").read_text())
    assert floor["agent"]["algorithm"]["learning_rate"] == FINETUNE_LEARNING_RATE
    for args, message in [
        ([f"finetune={teacher_run}"], "is not a distillation run (its algorithm is PPO)"),
        ([f"finetune={tmp_path / 'nope'}"], "no such run folder or checkpoint"),
        ([f"finetune={student_run}", DISTIL, f"teacher={teacher_run}"], "use agent.algorithm.class_name=PPO"),
    ]:
        assert main(["train", "task=arm_lift", f"log_root={tmp_path / 'new'}", "max_iterations=1", *TINY, *args]) == 2
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (args, err)
    assert not (tmp_path / "new").exists()


def test_critic_warmup_holds_the_actor_and_its_learning_rate():
    """During `critic_warmup_iterations` only the critic learns; the adaptive schedule does not raise the
    step meanwhile (a held actor has KL 0); after it the actor learns."""
    torch.manual_seed(0)
    agent = make_agent_cfg("arm_lift")
    agent.num_steps_per_env, agent.critic_warmup_iterations = 8, 2
    runner = BatonRunner(RslRlVecEnv(_env(32)), agent)
    actor = {k: v.detach().clone() for k, v in runner.alg.actor.named_parameters()}  # the normaliser's statistics move
    critic = {k: v.clone() for k, v in runner.alg.critic.state_dict().items()}
    runner.learn(2, progress=False)
    for name, value in runner.alg.actor.named_parameters():
        torch.testing.assert_close(value.detach(), actor[name], rtol=0, atol=0)
    assert not torch.equal(runner.alg.critic.state_dict()["mlp.0.weight"], critic["mlp.0.weight"])
    assert runner.alg.learning_rate == agent.algorithm.learning_rate
    runner.learn(3, progress=False)
    assert not torch.equal(runner.alg.actor.state_dict()["mlp.0.weight"], actor["mlp.0.weight"])


def test_one_line_errors(teacher_run, tmp_path, capsys):
    # A teacher of another task, and one trained on other observations (its checkpoint does not fit).
    reach_root, narrow_root = tmp_path / "reach", tmp_path / "narrow"
    assert main(["train", "task=arm_reach", "max_iterations=1", f"log_root={reach_root}", *TINY]) == 0
    assert main(["train", "task=arm_lift", "max_iterations=1", f"log_root={narrow_root}",
                 "~env.observations.privileged.terms.contacts", *TINY]) == 0
    reach_run, narrow_run = _only_run(reach_root, "arm_reach"), _only_run(narrow_root)
    # A distillation run (its policy is a student: no teacher of anyone).
    student_root = tmp_path / "student"
    assert main(["train", "task=arm_lift", DISTIL, "max_iterations=1", f"log_root={student_root}",
                 f"teacher={teacher_run}", *TINY]) == 0
    student_run = _only_run(student_root)
    capsys.readouterr()

    train = ["train", "task=arm_lift", f"log_root={tmp_path / 'new'}", "max_iterations=1", *TINY]
    for args, message in [
        ([*train, DISTIL], "agent.algorithm.class_name=Distillation needs teacher=RUN_DIR"),
        ([*train, f"teacher={teacher_run}"], "add agent.algorithm.class_name=Distillation"),
        ([*train, DISTIL, f"teacher={tmp_path / 'nope'}"], "no such run folder or checkpoint"),
        ([*train, DISTIL, f"teacher={reach_run}"], "is a run of task 'arm_reach', this run trains 'arm_lift'"),
        ([*train, DISTIL, f"teacher={narrow_run}"], "does not fit this teacher: teacher.obs_normalizer._mean has shape [1, 44]"),
        ([*train, DISTIL, f"teacher={student_run}"], "the teacher run is a distillation run"),
        ([*train, DISTIL, f"teacher={teacher_run}", "agent.algorithm.distillation.gradient_length=3"],
         "gradient_length=3 must divide"),
        ([*train, DISTIL, f"teacher={teacher_run}", "agent.algorithm.distillation.teacher_action_prob=1.5"],
         "teacher_action_prob=1.5 must be in [0, 1]"),
        (["train", "task=arm_lift", DISTIL, "resume=true", f"run_dir={student_run}", f"teacher={teacher_run}",
          "max_iterations=2", *TINY], "a resumed distillation keeps the teacher of its checkpoint"),
        (["export", f"run_dir={teacher_run}"], "reads the privileged observation group(s) ['privileged']"),
    ]:
        assert main(args) == 2, args
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (args, err)
    assert not (tmp_path / "new").exists()  # every refusal came before a run folder was written
    assert "agent.algorithm.class_name=Distillation teacher=RUN_DIR" in err  # the teacher's export names the way out


def test_runner_checkpoint_round_trip(teacher_run, tmp_path):
    torch.manual_seed(0)
    agent = _teacher_agent(teacher_run)
    agent.save_interval = 2
    first = BatonRunner(RslRlVecEnv(_env(16)), agent, log_dir=tmp_path)
    first.load_teacher(agent.teacher.checkpoint)
    first.learn(2, progress=False)

    resumed = BatonRunner(RslRlVecEnv(_env(16)), _teacher_agent(teacher_run), log_dir=tmp_path)
    with pytest.raises(RuntimeError, match="Distillation has no teacher"):
        resumed.learn(1, progress=False)
    resumed.load(tmp_path / "model_2.pt")
    assert resumed.iteration == 2 and resumed.total_env_steps == first.total_env_steps
    for model in ("student", "teacher"):
        old, new = getattr(first.alg, model).state_dict(), getattr(resumed.alg, model).state_dict()
        assert all(torch.equal(old[k], new[k]) for k in old), model  # normaliser statistics included
    old_opt, new_opt = first.alg.optimizer.state_dict(), resumed.alg.optimizer.state_dict()
    for key, slot in old_opt["state"].items():
        assert torch.equal(slot["exp_avg"], new_opt["state"][key]["exp_avg"])
    assert resumed.inference_policy() is resumed.alg.student  # play and export get the student
    resumed.learn(3, progress=False)
    assert checkpoint.load(tmp_path / "model_3.pt")["iter"] == 3

    # The two kinds of checkpoint do not mix.
    with pytest.raises(checkpoint.CheckpointError, match="pass its run as teacher=RUN_DIR"):
        resumed.load(teacher_run / "model_2.pt", load_optimizer=False)
    with pytest.raises(checkpoint.CheckpointError, match="holds no actor"):
        resumed.load_teacher(tmp_path / "model_2.pt")
    ppo = BatonRunner(RslRlVecEnv(_env(16)), make_agent_cfg("arm_lift"))
    with pytest.raises(checkpoint.CheckpointError, match="load it with agent.algorithm.class_name=Distillation"):
        ppo.load(tmp_path / "model_2.pt", load_optimizer=False)


def test_student_imitates_the_teacher(teacher_run):
    """DAgger (β-mixed rollouts falling to the student's own): the behaviour loss on a fixed batch of
    states falls well below the untrained student's."""
    torch.manual_seed(0)
    env = RslRlVecEnv(_env(32))
    agent = _teacher_agent(teacher_run)
    agent.algorithm.distillation.teacher_action_prob = 0.5
    agent.algorithm.distillation.teacher_action_iterations = 4
    runner = BatonRunner(env, agent)
    runner.load_teacher(runner.cfg.teacher.checkpoint)
    frames = []
    with torch.inference_mode():  # states the teacher visits, with its own privileged inputs
        obs = env.get_observations()
        for _ in range(8):
            frames.append(obs.clone())
            obs, _, _, _ = env.step(runner.alg.teacher(obs))
    batch = torch.cat(frames)

    def behaviour_loss() -> float:
        with torch.inference_mode():
            return torch.nn.functional.mse_loss(runner.alg.student(batch), runner.alg.teacher(batch)).item()

    before, logged = behaviour_loss(), []
    runner.learn(8, progress=False, on_iteration=lambda _, stats: logged.append(stats["Loss/behavior"]))
    after = behaviour_loss()
    print(f"\n[distillation] fixed-batch behaviour loss {before:.4f} -> {after:.4f}; logged {logged[0]:.4f} -> {logged[-1]:.4f}")
    assert after < 0.2 * before
    assert logged[-1] < 0.3 * logged[0]
    assert runner.alg.beta == 0.0


def test_dagger_beta_mixes_teacher_actions_into_the_rollout_and_falls_to_zero(teacher_run):
    """With probability β an env executes the teacher's (clipped) label; the stored transition keeps the
    student's action; β falls linearly over `teacher_action_iterations` updates and continues after a resume."""
    torch.manual_seed(0)
    env = _env(512)
    agent = _teacher_agent(teacher_run)
    agent.algorithm.distillation.teacher_action_prob = 0.5
    agent.algorithm.distillation.teacher_action_iterations = 4
    runner = BatonRunner(RslRlVecEnv(env), agent)
    runner.load_teacher(teacher_run / "model_2.pt")
    obs = env.get_observations()
    with torch.inference_mode():
        executed = runner.alg.act(obs)
    student, labels = runner.alg.transition.actions, runner.alg.transition.privileged_actions
    from_teacher = (executed == labels).all(dim=1)
    assert (from_teacher | (executed == student).all(dim=1)).all()
    assert 0.4 < from_teacher.float().mean() < 0.6, "half the envs execute the teacher's action"
    assert runner.alg.beta == 0.5
    runner.alg.num_updates = 2
    assert runner.alg.beta == 0.25
    runner.alg.num_updates = 4
    with torch.inference_mode():
        executed = runner.alg.act(obs)
    torch.testing.assert_close(executed, runner.alg.transition.actions)  # β = 0: the student acts
    env.close()


def test_teacher_labels_are_the_executed_actions(teacher_run):
    """Labels beyond where a command saturates (a gripper action of -5 closes it as -1 does) are clamped
    to the saturation bounds; inside them they are the teacher's own actions."""
    env = _env()
    runner = BatonRunner(RslRlVecEnv(env), _teacher_agent(teacher_run))
    runner.load_teacher(teacher_run / "model_2.pt")
    low, high = env.action_manager.saturation_bounds()
    assert low[-1] == -1.0 and high[-1] == 1.0  # the gripper: 0.02 ± 0.02 m per unit, control range 0 … 0.04 m
    torch.testing.assert_close(runner.alg.label_low, low)
    torch.testing.assert_close(runner.alg.label_high, high)
    with torch.no_grad():  # a teacher whose outputs are far out of range
        runner.alg.teacher.mlp[-1].bias.fill_(8.0)
    obs = env.get_observations()
    with torch.inference_mode():
        runner.alg.act(obs)
        raw = runner.alg.teacher(obs)
    labels = runner.alg.transition.privileged_actions
    torch.testing.assert_close(labels, torch.minimum(raw, high))
    assert (labels[:, -1] == 1.0).all() and (raw[:, -1] > 1.0).all()
    env.close()
