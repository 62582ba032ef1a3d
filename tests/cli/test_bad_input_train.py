# SPDX-License-Identifier: BSD-3-Clause
"""Bad input to train, play and export: one line naming the key, the value and what is expected, exit code 2,
before any env is built and without a run folder left behind (each case once failed later, or misleadingly)."""

from __future__ import annotations

import pytest
import torch

from batonlab.cli.main import main

ARM_JOINTS = "shoulder_yaw,shoulder_pitch,elbow_pitch,forearm_roll,wrist_pitch,wrist_roll"
LONG_NAME = "a" * 300

TRAIN_CASES = [
    (["env.num_envs=1000000000"], "env.num_envs=1000000000: the worlds' physics state alone needs 680.0 GB"),
    (["seed=123456789012345678901234567890"], "seed=123456789012345678901234567890: expected an integer in [0, 4294967295]"),
    (["seed=-1"], "seed=-1: expected an integer in [0, 4294967295]"),
    (["~env.observations.policy"], "a task needs a 'policy' observation group"),
    (["agent.obs_groups.critic=[privileged]"], "agent.obs_groups.critic=[privileged]: the task has no observation group"),
    (["~env.actions.arm"], "env.actions is empty: a task needs at least one action term"),
    (["~env.commands.ee_target"], "env.commands has no 'ee_target' (it has []), which "
                                  "env.observations.policy.terms.ee_target.params.command, env.rewards.ee_error"),
    ([f"agent.experiment_name={LONG_NAME}"], "agent.experiment_name=aaaaaaaaaaaaaaaaaaaa...: a name of 300 bytes; "
                                             "expected names of at most 255 bytes"),
    (["log_root={tmp}/" + LONG_NAME + "/logs"], "log_root={tmp}/aaaaaaaaaaaaaaaaaaaa.../logs: a name of 300 bytes"),
    (["env.sim.physics_dt=0"], "env.sim.physics_dt=0.0: expected a finite number > 0"),
    (["env.sim.physics_dt=-0.005"], "env.sim.physics_dt=-0.005: expected a finite number > 0"),
    (["env.sim.physics_dt=nan"], "env.sim.physics_dt=nan: expected a finite number > 0"),
    (["env.sim.physics_dt=inf"], "env.sim.physics_dt=inf: expected a finite number > 0"),
    (["agent.algorithm.learning_rate=nan"], "agent.algorithm.learning_rate=nan: expected a finite number > 0"),
    (["agent.algorithm.num_mini_batches=0"], "agent.algorithm.num_mini_batches=0: expected an integer >= 1"),
    (["agent.algorithm.num_learning_epochs=0"], "agent.algorithm.num_learning_epochs=0: expected an integer >= 1"),
    (["agent.policy.activation=nonsense"], "agent.policy.activation=nonsense: expected one of rsl-rl's activations ["),
    ([f"env.rewards.joint_vel.params.joints=[nope,{ARM_JOINTS.split(',', 1)[1]}]"],
     "env.rewards.joint_vel.params.joints=[nope, shoulder_pitch, elbow_pitch, forearm_roll, wrist_pitch, wrist_roll]: "
     "unknown joints ['nope']; the model has ['shoulder_yaw'"),
    (["env.actions.arm.joints=[nope]"], "env.actions.arm.joints=[nope]: unknown joints ['nope']"),
    (["agent.policy.actor_hidden_dims=[-5]"], "agent.policy.actor_hidden_dims=[-5]: expected a list of integers >= 1"),
    (["agent.policy.actor_hidden_dims=[0]"], "agent.policy.actor_hidden_dims=[0]: expected a list of integers >= 1"),
    (["agent.policy.critic_hidden_dims=[64,0]"], "agent.policy.critic_hidden_dims=[64, 0]: expected a list of integers"),
    (["agent.experiment_name=測試_ünï"], "'agent.experiment_name=測試_ünï': an unquoted value must be ASCII; quote it: "
                                      "agent.experiment_name='測試_ünï' (a quoted value may hold any characters)"),
    (["task=ärm_reach"], "'task=ärm_reach': an unquoted value must be ASCII; quote it: task='ärm_reach'"),
    (["env.rewards.ü=1"], "'env.rewards.ü=1': key 'env.rewards.ü' is not an ASCII name"),
    (["resume=true", "checkpoint={tmp}/run"], "checkpoint={tmp}/run is a folder: use run_dir={tmp}/run or name a "
                                              "model_N.pt in it"),
    (["resume=true", "checkpoint={tmp}/foreign.pt"], "checkpoint {tmp}/foreign.pt is not a batonlab checkpoint: it has "
                                                     "keys ['model']; batonlab train writes a dict with keys ['version'"),
    # Once one line already (tests/cli/test_cli_errors.py's cases before this corpus).
    (["env.num_envs=2.5"], "env.num_envs=2.5: expected an integer"),
    (["max_iterations=abc"], "max_iterations=abc: expected an integer"),
    (["seed=abc"], "seed=abc: expected an integer"),
    (["play.num_episodes=1.5"], "play.num_episodes=1.5: expected an integer"),
    (["agent.algorithm.learning_rate=fast"], "agent.algorithm.learning_rate=fast: expected a number"),
    (["env.rewards.ee_near.params.std=wide"], "env.rewards.ee_near.params.std=wide: expected a number"),
    (["env.commands.ee_target.resampling_time_range_s=[1,2,3]"], "expected a list of 2 numbers"),
    (["env.sim.backend=foo"], "env.sim.backend=foo: expected one of ['mujoco', 'mujoco_warp']"),
    (["max_iterations=0"], "max_iterations=0: expected an integer >= 1"),
    (["max_iterations=-5"], "max_iterations=-5: expected an integer >= 1"),
    (["agent.max_iterations=0"], "agent.max_iterations=0: expected an integer >= 1"),
    (["+max_iterations=3"], "no keys to add with '+'; valid top-level keys: ['task', 'robot', 'seed'"),
    (["++env.num_envs=3"], "no keys to add with '+'"),
    (["+foo=1"], "no keys to add with '+'"),
    (["seeed=1"], "unknown top-level key 'seeed'; valid top-level keys: ['task', 'robot', 'seed'"),
    (["env.seed=3"], "use seed=..."),
    (["task.num_envs=3"], "'task' is a string or null, it has no key 'num_envs' (the task's config is reached with env.*"),
    (["resume=true", "run_dir=nowhere"], "run_dir nowhere does not exist"),
    (["agent.algorithm.class_name=P3O"], "agent.algorithm.class_name=P3O learns from constraint costs and this task has none"),
    (["agent.algorithm.class_name=Bogus"], "agent.algorithm.class_name=Bogus: expected one of ['PPO', 'P3O', 'PPOLagrangian', 'Distillation']"),
    # Training to a target.
    (["stop_at=success"], "stop_at=success: expected success:RATE with RATE in (0, 1]"),
    (["stop_at=return:5"], "stop_at=return:5: expected success:RATE"),
    (["stop_at=success:1.5"], "stop_at=success:1.5: expected success:RATE"),
    (["stop_at=success:0"], "stop_at=success:0: expected success:RATE"),
    (["stop_at=success:0.9", "eval_interval=0"], "eval_interval=0: expected an integer >= 1"),
    (["stop_at=success:0.9", "eval_episodes=0"], "stop_at=success:0.9 is checked by play evaluations: eval_episodes=0"),
    (["keep_best=true", "eval_episodes=0"], "keep_best=true keeps the checkpoint of the best play evaluation: eval_episodes=0"),
    (["keep_best=maybe"], "keep_best"),
]

PLAY_CASES = [
    (["checkpoint={tmp}/run"], "checkpoint={tmp}/run is a folder: use run_dir={tmp}/run or name a model_N.pt in it"),
    (["checkpoint={tmp}/foreign.pt"], "checkpoint {tmp}/foreign.pt is not a batonlab checkpoint: it has keys ['model']"),
    (["checkpoint={tmp}/pickled.pt"], "checkpoint {tmp}/pickled.pt is not a batonlab checkpoint: it holds pickled"),
    (["checkpoint={tmp}/random.pt"], "checkpoint {tmp}/random.pt is not a batonlab checkpoint: not a torch.save file"),
    (["checkpoint={tmp}/version2.pt"], "checkpoint {tmp}/version2.pt has version 2, expected 1"),
    (["play.num_episodes=1000000000"], "play.num_episodes=1000000000: the worlds' physics state alone needs"),
    (["seed=123456789012345678901234567890"], "seed=123456789012345678901234567890: expected an integer in [0, "),
    (["agent.policy.activation=nonsense"], "agent.policy.activation=nonsense: expected one of rsl-rl's activations"),
    (["~env.commands.ee_target"], "env.commands has no 'ee_target'"),
    (["env.sim.physics_dt=0"], "env.sim.physics_dt=0.0: expected a finite number > 0"),
    (["agent.experiment_name=測試"], "quote it: agent.experiment_name='測試'"),
]


@pytest.fixture
def files(tmp_path):
    """A run folder without checkpoints and checkpoint files that batonlab did not write."""
    (tmp_path / "run").mkdir()
    torch.save({"model": {"weight": torch.ones(2)}}, tmp_path / "foreign.pt")
    torch.save({"model": torch.nn.Linear(2, 2)}, tmp_path / "pickled.pt")
    torch.save({"version": 2, "iter": 1, "total_env_steps": 8}, tmp_path / "version2.pt")
    (tmp_path / "random.pt").write_bytes(bytes(range(256)) * 8)
    return tmp_path


@pytest.mark.parametrize("extra,message", TRAIN_CASES, ids=[" ".join(a)[:60] for a, _ in TRAIN_CASES])
def test_train_refuses_in_one_line(extra, message, files, capsys, monkeypatch):
    _refused("train", extra, message, files, capsys, monkeypatch)


@pytest.mark.parametrize("command", ["play", "export"])
@pytest.mark.parametrize("extra,message", PLAY_CASES, ids=[" ".join(a)[:60] for a, _ in PLAY_CASES])
def test_play_and_export_refuse_in_one_line(command, extra, message, files, capsys, monkeypatch):
    _refused(command, extra, message, files, capsys, monkeypatch)


def _refused(command, extra, message, tmp, capsys, monkeypatch):
    import batonlab.env.env as env_module

    monkeypatch.setattr(env_module.BatonEnv, "__init__", _no_env)
    logs = tmp / "logs"
    before = sorted(tmp.iterdir())
    code = main([command, "task=arm_reach", f"log_root={logs}", *(a.replace("{tmp}", str(tmp)) for a in extra)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"batonlab {command}: ") and err.count("\n") == 1, err
    assert message.replace("{tmp}", str(tmp)) in err, err
    assert sorted(tmp.iterdir()) == before and not logs.exists()  # no run folder, no log root


def _no_env(*args, **kwargs):
    raise AssertionError("the env was built before the mistake was reported")
