# SPDX-License-Identifier: BSD-3-Clause
"""Constrained PPO: P3O's penalty, the Lagrange multipliers, cost GAE, checkpoints, and training with
costs through the real runner on arm_reach with a joint-speed cost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from rsl_rl.algorithms import PPO

from batonlab.observations.proprioception import joint_vel
from batonlab.cli.main import main
from batonlab.env.cfg import CostTermCfg, TaskCfg
from batonlab.env.env import BatonEnv
from batonlab.rl import checkpoint
from batonlab.rl.cfg import ALGORITHMS, AlgorithmCfg, ConstraintCfg, RunnerCfg, to_rsl_rl_dict
from batonlab.rl.constrained import P3O, PPOLagrangian, clipped_cost_surrogate, p3o_penalty
from batonlab.rl.cost_storage import CostStorage, mini_batches
from batonlab.rl.multipliers import LagrangeMultipliers
from batonlab.rl.runner import BatonRunner, output_std
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.robots.arm6 import ARM_JOINTS
from batonlab.tasks import make_agent_cfg, make_task_cfg

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="module")
def one_learner_thread():
    """The models here are tiny: on a shared 2-core machine, torch's worker threads only wait for each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def fast_joints(env, joints: tuple[str, ...], threshold: float) -> torch.Tensor:
    """1.0 while any of `joints` turns faster than `threshold` [rad/s], else 0.0 (num_envs,)."""
    return (joint_vel(env, joints).abs() > threshold).any(dim=1).float()


def make_reach_costs_cfg(play: bool = False) -> TaskCfg:
    """arm_reach with one constraint cost: joints faster than 5 rad/s on at most 5 % of the steps."""
    cfg = make_task_cfg("arm_reach", play=play)
    cfg.num_envs = 16
    cfg.sim.num_threads = 1
    cfg.costs["fast_joints"] = CostTermCfg(func=fast_joints, params={"joints": ARM_JOINTS, "threshold": 5.0}, limit=0.05)
    return cfg


def make_reach_costs_agent_cfg() -> RunnerCfg:
    agent = make_agent_cfg("arm_reach")
    agent.num_steps_per_env = 8
    agent.save_interval = 2
    return agent


def _runner(class_name: str, log_dir: Path | None = None, cfg: TaskCfg | None = None, **constraint) -> BatonRunner:
    agent = make_reach_costs_agent_cfg()
    agent.algorithm.class_name = class_name
    for key, value in constraint.items():
        setattr(agent.algorithm.constraint, key, value)
    return BatonRunner(RslRlVecEnv(BatonEnv(cfg or make_reach_costs_cfg())), agent, log_dir=log_dir)


# P3O's penalty.


def test_p3o_penalty_is_zero_while_limits_hold_and_grows_with_violation():
    torch.manual_seed(0)
    ratio = (1.0 + 0.3 * torch.randn(256)).clamp(0.5, 1.5).requires_grad_()
    cost_advantages = torch.randn(256, 2) * torch.tensor([0.1, 0.02])
    cost_advantages -= cost_advantages.mean(dim=0)  # centred, as the storage makes them
    surrogate = clipped_cost_surrogate(ratio, cost_advantages, clip_param=0.2)
    limits = torch.tensor([0.5, 0.1])
    assert (surrogate.abs() < 0.05).all()  # a small policy change moves the cost a little

    below = p3o_penalty(surrogate, torch.tensor([0.2, 0.0]), limits, kappa=10.0)
    assert torch.equal(below, torch.zeros(2))
    below.sum().backward()
    assert torch.equal(ratio.grad, torch.zeros_like(ratio))  # no pull on the policy while limits hold

    penalties = torch.stack([p3o_penalty(surrogate.detach(), limits + v, limits, kappa=10.0)
                             for v in (0.06, 0.1, 0.3, 1.0)])
    assert (penalties > 0).all() and (penalties.diff(dim=0) > 0).all()
    assert torch.allclose(penalties[-1] - penalties[-2], torch.full((2,), 10.0 * 0.7))  # kappa per unit of violation


def test_clipped_cost_surrogate_is_pessimistic():
    # A change of the policy that raises the cost counts fully (costly action more likely, cheap one less);
    # one that lowers it counts only up to the clip (costly action less likely, cheap one more).
    ratio = torch.tensor([2.0, 0.1, 2.0, 0.1])
    advantages = torch.tensor([[1.0], [1.0], [-1.0], [-1.0]])
    surrogate = clipped_cost_surrogate(ratio, advantages, clip_param=0.2)
    assert torch.allclose(surrogate, torch.tensor([(2.0 * 1.0 + 0.8 * 1.0 + 1.2 * -1.0 + 0.1 * -1.0) / 4]))


def _collect(runner: BatonRunner, costs: float) -> None:
    """One rollout of the real env, with hand-made costs (num_envs, 1) of the given value in every step."""
    alg, env = runner.alg, runner.env
    obs = env.get_observations()
    with torch.inference_mode():
        for _ in range(runner.cfg.num_steps_per_env):
            obs, rewards, dones, extras = env.step(alg.act(obs))
            extras["costs"] = torch.full((env.num_envs, 1), costs)
            alg.process_env_step(obs, rewards, dones, extras)
        alg.compute_returns(obs)


def test_p3o_update_has_no_penalty_below_the_limit_and_one_above():
    torch.manual_seed(0)
    runner = _runner("P3O")
    alg = runner.alg
    _collect(runner, costs=0.0)
    alg.set_cost_limits(torch.tensor([0.5]))
    losses = alg.update()
    assert torch.equal(alg.mean_cost, torch.zeros(1))
    assert torch.equal(alg.constraint_stats()["penalty"], torch.zeros(1)) and losses["constraint"] == 0.0

    _collect(runner, costs=1.0)
    alg.set_cost_limits(torch.tensor([0.5]))
    alg.update()
    assert torch.allclose(alg.mean_cost, torch.ones(1))
    # About kappa * (1 - 0.5): the cost surrogate of centred advantages stays small.
    assert 0.8 * 5.0 < alg.constraint_stats()["penalty"].item() < 1.2 * 5.0


# Lagrange multipliers.


@pytest.mark.parametrize("rule", ["gradient", "pid"])
def test_multipliers_rise_under_violation_and_return_to_zero(rule):
    cfg = ConstraintCfg(multiplier_update=rule, multiplier_lr=1.0, pid_kp=2.0, pid_ki=1.0, pid_kd=1.0, multiplier_max=50.0)
    multipliers = LagrangeMultipliers(2, cfg)
    limits = torch.tensor([0.1, 0.2])
    violated = torch.tensor([0.4, 0.2])  # the first cost over its limit, the second exactly at it
    rising = [multipliers.update(violated, limits).clone() for _ in range(5)]
    first = torch.stack(rising)[:, 0]
    assert (first > 0).all() and (first.diff() > 0).all()
    assert torch.equal(torch.stack(rising)[:, 1], torch.zeros(5))  # no violation, no multiplier

    satisfied = torch.tensor([0.0, 0.0])
    falling = torch.stack([multipliers.update(satisfied, limits).clone() for _ in range(40)])[:, 0]
    assert (falling.diff() <= 0).all() and falling[0] < first[-1]
    assert falling[-1] == 0.0 and (falling >= 0).all()


def test_pid_integral_alone_is_the_gradient_rule_and_multipliers_are_bounded():
    gradient = LagrangeMultipliers(1, ConstraintCfg(multiplier_update="gradient", multiplier_lr=0.5, multiplier_init=1.0))
    pid = LagrangeMultipliers(1, ConstraintCfg(multiplier_update="pid", pid_kp=0.0, pid_ki=0.5, pid_kd=0.0,
                                               multiplier_init=1.0))
    limit = torch.tensor([0.1])
    for mean_cost in (0.5, 0.3, 0.0, 0.0, 0.0, 0.0, 0.9):
        cost = torch.tensor([mean_cost])
        assert torch.allclose(gradient.update(cost, limit), pid.update(cost, limit))
    capped = LagrangeMultipliers(1, ConstraintCfg(multiplier_lr=100.0, multiplier_max=3.0))
    assert capped.update(torch.tensor([1.0]), limit).item() == 3.0


def test_lagrangian_update_steps_the_multiplier_before_the_policy_update():
    torch.manual_seed(0)
    runner = _runner("PPOLagrangian", multiplier_lr=2.0)
    _collect(runner, costs=1.0)
    runner.alg.set_cost_limits(torch.tensor([0.25]))
    runner.alg.update()
    assert torch.allclose(runner.alg.constraint_stats()["multiplier"], torch.tensor([2.0 * 0.75]))


def test_cost_critic_learns_the_cost_returns():
    """With a cost of 1 in every step the cost-to-go grows towards 1 / (1 - gamma) = 100; the critic follows it."""
    torch.manual_seed(0)
    runner = _runner("P3O")
    first_returns = None
    for _ in range(8):
        _collect(runner, costs=1.0)
        if first_returns is None:
            first_returns = runner.alg.cost_storage.returns.mean().item()
            assert abs(runner.alg.cost_storage.values.mean().item()) < 0.5  # an untrained critic
        runner.alg.set_cost_limits(torch.tensor([0.05]))
        runner.alg.update()
    assert runner.alg.cost_storage.values.mean().item() > 2.0 * first_returns


# Cost GAE.


def test_cost_gae_on_a_hand_made_rollout():
    """T = 3 steps, N = 2 envs, gamma = lam = 0.5; env 0 terminates at step 1, env 1 times out at step 1.

    Env 0: costs (1, 0, 1), values (2, 1, 1), value after the rollout 4.
      step 2: delta = 1 + 0.5 * 4 - 1 = 2;               A = 2;                      R = 3
      step 1: terminal, delta = 0 - 1 = -1;              A = -1;                     R = 0
      step 0: delta = 1 + 0.5 * 1 - 2 = -0.5;            A = -0.5 + 0.25 * -1 = -0.75; R = 1.25
    Env 1: costs (0, 1, 0), values (1, 2, 2), value after the rollout 2; the time-out adds 0.5 * 2 to step 1's cost.
      step 2: delta = 0 + 0.5 * 2 - 2 = -1;              A = -1;                     R = 1
      step 1: terminal, delta = (1 + 1) - 2 = 0;         A = 0;                      R = 2
      step 0: delta = 0 + 0.5 * 2 - 1 = 0;               A = 0 + 0.25 * 0 = 0;       R = 1
    Advantages (-0.75, -1, 2 | 0, 0, -1) have mean -0.125, which is removed; their std is kept.
    The second cost is the first one doubled: every number doubles.
    """
    storage = CostStorage(3, 2, 2)
    costs = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]])  # (T, N)
    values = torch.tensor([[2.0, 1.0], [1.0, 2.0], [1.0, 2.0]])
    time_outs = torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 0.0]])
    dones = torch.tensor([[0, 0], [1, 1], [0, 0]], dtype=torch.uint8).unsqueeze(-1)  # a time-out is a done too
    for step in range(3):
        storage.add(torch.stack([costs[step], 2 * costs[step]], dim=-1),
                    torch.stack([values[step], 2 * values[step]], dim=-1), time_outs[step].bool())
    storage.compute_returns(torch.tensor([[4.0, 8.0], [2.0, 4.0]]), dones, gamma=0.5, lam=0.5)

    returns = torch.tensor([[1.25, 1.0], [0.0, 2.0], [3.0, 1.0]])
    advantages = torch.tensor([[-0.75, 0.0], [-1.0, 0.0], [2.0, -1.0]]) + 0.125
    assert torch.allclose(storage.returns, torch.stack([returns, 2 * returns], dim=-1))
    assert torch.allclose(storage.advantages, torch.stack([advantages, 2 * advantages], dim=-1))
    assert torch.allclose(storage.mean_cost(), torch.tensor([0.5, 1.0]))  # the env's costs, not the bootstrapped ones


def test_cost_mini_batches_carry_the_rows_of_the_ppo_batch():
    torch.manual_seed(0)
    runner = _runner("P3O")
    alg = runner.alg
    _collect(runner, costs=0.0)
    # Tag each (step, env) in both storages with its flat index, then check every mini-batch row pairs them.
    tags = torch.arange(alg.storage.num_transitions_per_env * alg.storage.num_envs, dtype=torch.float32)
    alg.storage.values = tags.reshape(alg.storage.values.shape).clone()
    alg.cost_storage.values = tags.reshape(alg.cost_storage.values.shape).clone()
    seen = []
    for batch, cost_batch in mini_batches(alg.storage, alg.cost_storage, num_mini_batches=4, num_epochs=2):
        assert torch.equal(batch.values, cost_batch.values)
        seen.append(batch.values.flatten())
    assert len(seen) == 8 and torch.equal(torch.cat(seen[:4]).sort().values, tags)


# Construction and configuration.


def test_algorithm_selection_and_its_errors():
    assert set(ALGORITHMS) == {"PPO", "P3O", "PPOLagrangian", "Distillation"}
    ppo = to_rsl_rl_dict(RunnerCfg())["algorithm"]
    assert ppo["class_name"] == "PPO" and not {"constraint", "constraint_cfg", "num_costs"} & set(ppo)
    with pytest.raises(ValueError, match=r"valid names: \['PPO', 'P3O', 'PPOLagrangian', 'Distillation'\]"):
        to_rsl_rl_dict(RunnerCfg(algorithm=AlgorithmCfg(class_name="Bogus")))
    no_costs = make_task_cfg("arm_reach")
    no_costs.num_envs = 4
    agent = make_reach_costs_agent_cfg()
    agent.algorithm.class_name = "P3O"
    with pytest.raises(ValueError, match="this task has no `costs`"):
        BatonRunner(RslRlVecEnv(BatonEnv(no_costs)), agent)


def test_cli_overrides_select_the_algorithm(capsys):
    from batonlab.cli.common import build_invocation

    inv = build_invocation(["task=wl_loco_manip", "agent.algorithm.class_name=PPOLagrangian",
                            "agent.algorithm.constraint.multiplier_update=pid", "agent.algorithm.constraint.pid_kp=3"])
    assert inv.agent.algorithm.class_name == "PPOLagrangian"
    assert inv.agent.algorithm.constraint.multiplier_update == "pid" and inv.agent.algorithm.constraint.pid_kp == 3.0
    assert main(["train", "task=arm_reach", "agent.algorithm.class_name=Bogus"]) == 2
    err = capsys.readouterr().err
    assert "agent.algorithm.class_name=Bogus: expected one of ['PPO', 'P3O', 'PPOLagrangian', 'Distillation']" in err


def test_recurrent_models_rnd_and_symmetry_are_refused():
    runner = _runner("P3O")
    alg = runner.alg
    kwargs = {"num_costs": 1, "cost_critic_cfg": {}, "constraint_cfg": {}}
    with pytest.raises(ValueError, match="RND"):
        P3O(alg.actor, alg.critic, alg.storage, rnd_cfg={"weight": 1.0}, **kwargs)
    with pytest.raises(ValueError, match="symmetry"):
        PPOLagrangian(alg.actor, alg.critic, alg.storage, symmetry_cfg={"use_data_augmentation": True}, **kwargs)
    train_cfg = to_rsl_rl_dict(runner.cfg, num_costs=1)
    train_cfg["actor"].update(class_name="RNNModel", rnn_hidden_dim=8)
    with pytest.raises(ValueError, match="recurrent"):
        PPO.construct_algorithm(runner.env.get_observations(), runner.env, train_cfg, "cpu")


# Training, logs and checkpoints through the runner.


def test_training_logs_cost_scalars_for_every_algorithm(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    for class_name, extra in (("PPO", None), ("P3O", "penalty"), ("PPOLagrangian", "multiplier")):
        torch.manual_seed(0)
        runner = _runner(class_name, log_dir=tmp_path / class_name)
        history = []
        runner.learn(3, progress=False, on_iteration=lambda r, stats: history.append(stats))
        for stats in history:
            assert stats["Cost/fast_joints/limit"] == pytest.approx(0.05)
            assert 0.0 <= stats["Cost/fast_joints/mean_cost"] <= 1.0
            # An indicator cost: the mean cost is the fraction of steps in violation.
            assert stats["Cost/fast_joints/violation_rate"] == pytest.approx(stats["Cost/fast_joints/mean_cost"])
            assert ("Cost/fast_joints/penalty" in stats) == (extra == "penalty")
            assert ("Cost/fast_joints/multiplier" in stats) == (extra == "multiplier")
        assert any("Cost/fast_joints/episode_cost" in stats for stats in history)
        if class_name != "PPO":
            assert history[-1][f"Cost/fast_joints/{extra}"] > 0  # random actions break the speed limit
            assert history[-1]["Loss/cost_value"] > 0
        # The logged std is the actor's, read from its parameters (no forward pass needed).
        assert history[-1]["Policy/mean_std"] == pytest.approx(float(output_std(runner.alg.get_policy()).mean()))
        runner._writer.flush()
        tags = EventAccumulator(str(tmp_path / class_name)).Reload().Tags()["scalars"]
        assert {"Cost/fast_joints/mean_cost", "Cost/fast_joints/limit", "Cost/fast_joints/violation_rate"} <= set(tags)


def test_limits_are_read_from_the_env_every_iteration():
    runner = _runner("PPOLagrangian")

    def tighten(runner: BatonRunner, stats: dict) -> None:
        runner.env.env.cost_manager.limits.fill_(0.5 if runner.iteration == 1 else 0.01)

    history = []
    runner.learn(3, progress=False, on_iteration=lambda r, s: (history.append(s), tighten(r, s)))
    assert [s["Cost/fast_joints/limit"] for s in history] == pytest.approx([0.05, 0.5, 0.01])
    assert torch.allclose(runner.alg.limits, torch.tensor([0.01]))


@pytest.mark.parametrize("class_name", ["P3O", "PPOLagrangian"])
def test_cost_critic_and_multipliers_survive_save_and_resume(tmp_path, class_name):
    torch.manual_seed(0)
    first = _runner(class_name, tmp_path)
    first.learn(2, progress=False)
    saved = checkpoint.load(tmp_path / "model_2.pt")
    assert saved["algorithm"] == class_name and "cost_critic_state_dict" in saved

    resumed = _runner(class_name)
    resumed.load(tmp_path / "model_2.pt")
    for name, tensor in first.alg.cost_critic.state_dict().items():
        assert torch.equal(tensor, resumed.alg.cost_critic.state_dict()[name]), name
    assert len(resumed.alg.optimizer.param_groups) == 2  # actor + critic, cost critic
    if class_name == "PPOLagrangian":
        assert first.alg.multipliers.value.item() > 0
        for key, value in first.alg.multipliers.state_dict().items():
            assert torch.equal(value, resumed.alg.multipliers.state_dict()[key]), key
    resumed.learn(3, progress=False)
    assert resumed.iteration == 3


def test_checkpoints_of_another_algorithm_or_cost_set(tmp_path):
    _runner("PPO").save(tmp_path / "ppo.pt")
    _runner("P3O").save(tmp_path / "p3o.pt")
    with pytest.raises(checkpoint.CheckpointError, match="trained with PPO, this run uses P3O"):
        _runner("P3O").load(tmp_path / "ppo.pt")
    with pytest.raises(checkpoint.CheckpointError, match="trained with P3O, this run uses PPO"):
        _runner("PPO").load(tmp_path / "p3o.pt")
    with pytest.raises(checkpoint.CheckpointError, match="trained with P3O, this run uses PPOLagrangian"):
        _runner("PPOLagrangian").load(tmp_path / "p3o.pt")
    # Play and export load only the policy: any algorithm's actor fits.
    policy_only = _runner("PPO")
    policy_only.load(tmp_path / "p3o.pt", load_optimizer=False)
    saved_actor = checkpoint.load(tmp_path / "p3o.pt")["actor_state_dict"]
    assert torch.equal(policy_only.alg.actor.mlp[0].weight, saved_actor["mlp.0.weight"])

    two_costs = make_reach_costs_cfg()
    two_costs.costs["very_fast_joints"] = CostTermCfg(func=fast_joints, params={"joints": ARM_JOINTS, "threshold": 8.0},
                                                      limit=0.01)
    with pytest.raises(checkpoint.CheckpointError, match=r"cost_critic\.mlp\.6\.weight has shape \[1, 64\] in the "
                                                         r"checkpoint and \[2, 64\] in this model"):
        _runner("P3O", cfg=two_costs).load(tmp_path / "p3o.pt")


WORKER = """
import sys, torch
from batonlab.env.env import BatonEnv
from batonlab.rl import distributed
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from tests.rl.test_constrained_ppo import make_reach_costs_agent_cfg, make_reach_costs_cfg

ctx = distributed.context_from_environment("cpu")
distributed.init_process_group(ctx)
cfg = make_reach_costs_cfg()
cfg.seed += ctx.rank
torch.set_num_threads(1)
agent = make_reach_costs_agent_cfg()
agent.algorithm.class_name = "PPOLagrangian"
runner = BatonRunner(RslRlVecEnv(BatonEnv(cfg)), agent, distributed=ctx)
runner.learn(2, progress=False)
torch.save({"multipliers": runner.alg.multipliers.value, "cost_critic": runner.alg.cost_critic.state_dict(),
            "actor": runner.alg.actor.state_dict(), "rank_state": float(runner.env.env.sim.qpos.sum())},
           f"{sys.argv[1]}/rank{ctx.rank}.pt")
distributed.shutdown()
"""


def test_two_ranks_agree_on_multipliers_and_cost_critic(tmp_path):
    (tmp_path / "worker.py").write_text(WORKER)
    torchrun_keys = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
    env = {k: v for k, v in os.environ.items() if k not in torchrun_keys}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                             str(tmp_path / "worker.py"), str(tmp_path)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    rank0, rank1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))
    # Different seeds, different rollouts (the worlds' states; a rank's mean cost is a fraction of few steps,
    # which two ranks can share by chance: 0.765625 on both was seen once).
    assert rank0["rank_state"] != rank1["rank_state"]
    assert torch.equal(rank0["multipliers"], rank1["multipliers"])  # ... but one all-reduced mean cost
    for model in ("cost_critic", "actor"):
        for name, tensor in rank0[model].items():
            assert torch.equal(tensor, rank1[model][name]), f"{model}.{name}"
