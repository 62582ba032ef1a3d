# SPDX-License-Identifier: BSD-3-Clause
"""Curricula: level promotion/demotion, command-range widening and the bandit, on synthetic statistics;
their state through save/load, alone and inside a runner checkpoint."""

from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
import torch

from batonlab.curricula.bandit import BoltzmannBandit, TerrainBanditCurriculum, arm_rewards
from batonlab.curricula.command_range import CommandRangeCurriculum, should_widen, widen
from batonlab.curricula.levels import TerrainLevels, level_changes
from batonlab.terrain import Terrain, TerrainCfg, TerrainState


def _roundtrip(state: dict) -> dict:
    """What a checkpoint does to a state dict: torch.save, then torch.load(weights_only=True)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


def _small_terrain_state(num_envs: int, seed: int = 0, max_init_level: int = 0) -> TerrainState:
    cfg = TerrainCfg(kind="grid", num_levels=4, types=("flat", "rough", "slope"), tile_size=2.0, border=1.0,
                     platform_size=0.6, max_init_level=max_init_level)
    return TerrainState(Terrain(cfg), num_envs, torch.device("cpu"), torch.Generator().manual_seed(seed))


def _fake_env(num_envs: int, **fields) -> SimpleNamespace:
    metrics = {k: torch.zeros(num_envs) for k in ("distance_commanded", "distance_traveled", "lin_vel_error", "time")}
    command = SimpleNamespace(metrics=metrics, ranges={"lin_vel_x": (-1.0, 1.0), "ang_vel_z": (-1.0, 1.0)})
    env = SimpleNamespace(
        num_envs=num_envs,
        generator=torch.Generator().manual_seed(0),
        terrain=_small_terrain_state(num_envs),
        command_manager=SimpleNamespace(terms={"base_velocity": command}),
        termination_manager=SimpleNamespace(terminated=torch.zeros(num_envs, dtype=torch.bool)),
        episode_length_buf=torch.zeros(num_envs, dtype=torch.long),
        max_episode_length_s=20.0,
        step_dt=0.02,
        common_step_counter=0,
    )
    for key, value in fields.items():
        setattr(env, key, value)
    return env


# Levels.


def test_level_rule_promotes_good_trackers_and_demotes_failures():
    traveled = torch.tensor([8.0, 5.1, 4.0, 1.0, 9.0, 0.1, 0.0])
    commanded = torch.tensor([10.0, 10.0, 10.0, 10.0, 10.0, 0.2, 0.2])
    failed = torch.tensor([False, False, False, False, True, False, True])
    up, down = level_changes(traveled, commanded, failed, promote_fraction=0.5, demote_fraction=0.25,
                             min_commanded_distance=0.5)
    # >= half: up; between a quarter and a half: stay; < a quarter: down; failure: down; standing: only on failure.
    assert up.tolist() == [True, True, False, False, False, False, False]
    assert down.tolist() == [False, False, False, True, True, False, True]
    assert not (up & down).any()


def test_terrain_levels_term_moves_envs_and_their_origins():
    env = _fake_env(6)
    term = TerrainLevels(env, command="base_velocity")
    env.terrain.set_cells(torch.arange(6), levels=torch.tensor([0, 1, 2, 3, 2, 0]))
    metrics = env.command_manager.terms["base_velocity"].metrics
    metrics["time"][:] = 20.0
    metrics["distance_commanded"][:] = 10.0
    metrics["distance_traveled"][:] = torch.tensor([9.0, 9.0, 1.0, 9.0, 4.0, 0.0])
    env.termination_manager.terminated[:] = torch.tensor([False, False, False, False, False, True])
    log = term(env, torch.arange(6))
    levels = env.terrain.levels
    assert levels[:3].tolist() == [1, 2, 1]  # promoted, promoted, demoted
    assert 0 <= levels[3] < 4  # passed the last level: a random level
    assert levels[4] == 2 and levels[5] == 0  # stays; demoted but already at 0
    expected = env.terrain.tile_origins[levels, env.terrain.types]
    assert torch.equal(env.terrain.env_origins, expected)
    assert log["promoted"] == pytest.approx(3 / 6) and log["demoted"] == pytest.approx(2 / 6)


def test_terrain_levels_ignore_envs_without_an_episode():
    env = _fake_env(3)
    term = TerrainLevels(env)
    env.termination_manager.terminated[:] = True
    env.terrain.set_cells(torch.arange(3), levels=torch.tensor([2, 2, 2]))
    term(env, torch.arange(3))  # time == 0 everywhere: nothing to judge
    assert env.terrain.levels.tolist() == [2, 2, 2]


def test_terrain_levels_state_survives_save_and_load():
    env = _fake_env(8)
    term = TerrainLevels(env)
    env.terrain.set_cells(torch.arange(8), levels=torch.tensor([0, 1, 2, 3, 3, 2, 1, 0]))
    state = _roundtrip(term.state_dict())
    other = _fake_env(8)
    other_term = TerrainLevels(other)
    other_term.load_state_dict(state)
    assert torch.equal(other.terrain.levels, env.terrain.levels)
    assert torch.equal(other.terrain.env_origins, env.terrain.env_origins)
    # A different number of envs (play) draws its tiles from the saved ones.
    play = _fake_env(32)
    TerrainLevels(play).load_state_dict(state)
    assert set(play.terrain.levels.tolist()) <= set(env.terrain.levels.tolist())


# Command ranges.


def _range_env(episode_sum: float, weight: float = 2.0) -> SimpleNamespace:
    env = _fake_env(4)
    env.episode_length_buf[:] = 1000  # 20 s episodes
    env.reward_manager = SimpleNamespace(cfgs={"track_lin_vel_x": SimpleNamespace(weight=weight)},
                                         episode_raw_sums={"track_lin_vel_x": torch.full((4,), episode_sum / weight)})
    return env


def test_command_range_rule():
    assert should_widen(1.7, weight=2.0, fraction=0.8) and not should_widen(1.5, weight=2.0, fraction=0.8)
    assert widen((-1.0, 1.0), (-1.5, 1.5), 0.2) == (-1.2, 1.2)
    assert widen((-1.4, 1.4), (-1.5, 1.5), 0.2) == (-1.5, 1.5)


def test_command_range_widens_only_when_tracking_is_good_and_once_per_window():
    # Episode sum 36 over a 20 s episode: 1.8 per second, 90 % of the weight 2.0.
    env = _range_env(episode_sum=36.0)
    term = CommandRangeCurriculum(env, command="base_velocity", reward_term="track_lin_vel_x",
                                  limits={"lin_vel_x": (-1.3, 1.3)}, step={"lin_vel_x": 0.2}, fraction=0.8)
    ranges = env.command_manager.terms["base_velocity"].ranges
    term(env, torch.arange(4))
    assert ranges["lin_vel_x"] == (-1.0, 1.0)  # the first window is not over yet
    env.common_step_counter = term.interval_steps
    term(env, torch.arange(4))
    assert ranges["lin_vel_x"] == pytest.approx((-1.2, 1.2))
    env.common_step_counter += 1
    term(env, torch.arange(4))
    assert ranges["lin_vel_x"] == pytest.approx((-1.2, 1.2))  # at most once per window
    env.common_step_counter += term.interval_steps
    log = term(env, torch.arange(4))
    assert ranges["lin_vel_x"] == pytest.approx((-1.3, 1.3))  # capped at the limit
    assert log["lin_vel_x_high"] == pytest.approx(1.3) and log["widenings"] == 2.0
    assert ranges["ang_vel_z"] == (-1.0, 1.0)  # ranges without a limit are left alone

    poor = _range_env(episode_sum=20.0)  # 1.0 per second: 50 % of the maximum
    poor_term = CommandRangeCurriculum(poor, command="base_velocity", reward_term="track_lin_vel_x",
                                       limits={"lin_vel_x": (-2.0, 2.0)}, step={"lin_vel_x": 0.2})
    poor.common_step_counter = poor_term.interval_steps
    poor_term(poor, torch.arange(4))
    assert poor.command_manager.terms["base_velocity"].ranges["lin_vel_x"] == (-1.0, 1.0)

    # The same sum earned in a 10 s episode (cut short by leaving the terrain) is good tracking.
    short = _range_env(episode_sum=18.0)
    short.episode_length_buf[:] = 500
    short_term = CommandRangeCurriculum(short, command="base_velocity", reward_term="track_lin_vel_x",
                                        limits={"lin_vel_x": (-2.0, 2.0)}, step={"lin_vel_x": 0.2})
    short.common_step_counter = short_term.interval_steps
    short_term(short, torch.arange(4))
    assert short.command_manager.terms["base_velocity"].ranges["lin_vel_x"] == pytest.approx((-1.2, 1.2))


def test_command_range_state_survives_save_and_load():
    env = _range_env(episode_sum=40.0)
    kwargs = {"command": "base_velocity", "reward_term": "track_lin_vel_x", "limits": {"lin_vel_x": (-2.0, 2.0)},
              "step": {"lin_vel_x": 0.25}}
    term = CommandRangeCurriculum(env, **kwargs)
    env.common_step_counter = term.interval_steps
    term(env, torch.arange(4))
    other = _range_env(episode_sum=0.0)
    other_term = CommandRangeCurriculum(other, **kwargs)
    other_term.load_state_dict(_roundtrip(term.state_dict()))
    assert other.command_manager.terms["base_velocity"].ranges["lin_vel_x"] == pytest.approx((-1.25, 1.25))
    assert other_term.num_widenings == 1


def test_command_range_rejects_unknown_names():
    env = _range_env(episode_sum=0.0)
    with pytest.raises(KeyError, match="reward term"):
        CommandRangeCurriculum(env, "base_velocity", "track_typo", {"lin_vel_x": (-2, 2)}, {"lin_vel_x": 0.1})
    with pytest.raises(KeyError, match="keys"):
        CommandRangeCurriculum(env, "base_velocity", "track_lin_vel_x", {"lin_vel_y": (-2, 2)}, {"lin_vel_y": 0.1})


# Bandit.


def test_bandit_values_move_to_the_largest_advantage_and_sampling_follows():
    bandit = BoltzmannBandit(num_arms=4, learning_rate=0.2, temperature=0.1)
    assert torch.allclose(bandit.probabilities(), torch.full((4,), 0.25))
    mean_abs_advantage = torch.tensor([0.2, 0.9, 0.4, 0.3])
    generator = torch.Generator().manual_seed(0)
    previous_gap = 0.0
    for _ in range(30):
        noisy = mean_abs_advantage + 0.02 * torch.randn(4, generator=generator)
        bandit.update(noisy, torch.ones(4, dtype=torch.bool))
        gap = (bandit.values[1] - bandit.values[[0, 2, 3]].max()).item()
        assert gap >= previous_gap - 0.02  # the favourite's lead only grows (up to noise)
        previous_gap = gap
    # TD(0) converges to each arm's mean reward.
    assert torch.allclose(bandit.values, mean_abs_advantage, atol=0.05)
    probs = bandit.probabilities()
    assert probs.argmax().item() == 1 and probs[1] > 0.9
    assert torch.all(probs[[2, 3, 0]].diff() <= 0)  # ordered like the values: 0.4 > 0.3 > 0.2
    samples = bandit.sample(20000, torch.Generator().manual_seed(1))
    frequencies = torch.bincount(samples, minlength=4).float() / samples.numel()
    assert torch.allclose(frequencies, probs, atol=0.01)


def test_bandit_td0_step_and_unobserved_arms():
    bandit = BoltzmannBandit(num_arms=3, learning_rate=0.5, temperature=1.0, initial_value=1.0)
    bandit.update(torch.tensor([3.0, 0.0, 9.0]), torch.tensor([True, True, False]))
    assert bandit.values.tolist() == [2.0, 0.5, 1.0]  # V + 0.5 (r - V); arm 2 unobserved
    assert bandit.counts.tolist() == [1, 1, 0]


def test_arm_rewards_average_each_arms_samples():
    abs_adv = torch.tensor([[1.0, 2.0, 3.0], [5.0, 9.0, 7.0]])
    arms = torch.tensor([[0, 1, 1], [0, 0, 1]])
    rewards, observed = arm_rewards(abs_adv, arms, num_arms=3)
    assert rewards.tolist() == [pytest.approx(5.0), pytest.approx(4.0), 0.0]  # (1 + 5 + 9) / 3, (2 + 3 + 7) / 3
    assert observed.tolist() == [True, True, False]


def test_terrain_bandit_splits_a_rollout_between_previous_and_current_arm():
    env = _fake_env(2)
    term = TerrainBanditCurriculum(env, arms="types", learning_rate=1.0, temperature=1.0)
    env.terrain.set_cells(torch.arange(2), types=torch.tensor([0, 1]))
    term.arm_of_env[:] = torch.tensor([0, 1])
    term.previous_arm[:] = torch.tensor([0, 1])
    # Env 0 resets onto type 2 for the last 2 of 4 rollout steps; env 1 stays on type 1.
    term.arm_of_env[0], term.previous_arm[0] = 2, 0
    env.episode_length_buf[:] = torch.tensor([2, 100])
    abs_adv = torch.tensor([[1.0, 0.5], [1.0, 0.5], [3.0, 0.5], [3.0, 0.5]])
    term.observe_advantages(env, abs_adv)
    assert term.bandit.values.tolist() == pytest.approx([1.0, 0.5, 3.0])  # alpha = 1: values = this round's means
    assert term.previous_arm.tolist() == [2, 1]


def test_terrain_bandit_assigns_tiles_by_the_bandit_and_survives_save_and_load():
    env = _fake_env(64)
    term = TerrainBanditCurriculum(env, arms="types", learning_rate=0.5, temperature=0.05)
    # Type 2 has by far the largest |advantage|: after a few rounds nearly every reset goes there.
    for _ in range(10):
        abs_adv = torch.where(env.terrain.types == 2, 2.0, 0.5).expand(8, 64)
        env.episode_length_buf[:] = 100
        term.observe_advantages(env, abs_adv)
        log = term(env, torch.arange(64))
    assert term.bandit.values.argmax().item() == 2
    assert (env.terrain.types == 2).float().mean() > 0.9
    assert log["prob_2"] > 0.9
    assert torch.equal(env.terrain.env_origins, env.terrain.tile_origins[env.terrain.levels, env.terrain.types])

    state = _roundtrip(term.state_dict())
    other = _fake_env(64)
    other_term = TerrainBanditCurriculum(other, arms="types", learning_rate=0.5, temperature=0.05)
    other_term.load_state_dict(state)
    assert torch.equal(other_term.bandit.values, term.bandit.values)
    assert torch.equal(other.terrain.types, env.terrain.types)
    assert torch.equal(other_term.arm_of_env, term.arm_of_env)


@pytest.mark.parametrize("arms, num_arms", [("types", 3), ("levels", 4), ("cells", 12)])
def test_terrain_bandit_arm_kinds(arms, num_arms):
    env = _fake_env(16)
    term = TerrainBanditCurriculum(env, arms=arms)
    assert term.bandit.num_arms == num_arms
    term(env, torch.arange(16))
    assert torch.equal(term.arm_of_env, term._arm_of_cell(env.terrain.levels, env.terrain.types))


# Inside a real run: the runner feeds advantages and the checkpoint carries every curriculum's state.


def test_curriculum_state_travels_in_runner_checkpoints(tmp_path):
    from batonlab.env.env import BatonEnv
    from batonlab.rl.runner import BatonRunner
    from batonlab.rl.vecenv import RslRlVecEnv
    from batonlab.tasks import make_agent_cfg, make_task_cfg

    def build(seed: int):
        cfg = make_task_cfg("wl_velocity_bandit")
        cfg.num_envs, cfg.seed = 16, seed
        cfg.scene.terrain.num_levels, cfg.scene.terrain.tile_size = 3, 3.0
        agent = make_agent_cfg("wl_velocity_bandit")
        agent.num_steps_per_env = 8
        agent.policy.actor_hidden_dims = agent.policy.critic_hidden_dims = (32,)
        env = BatonEnv(cfg)
        return env, BatonRunner(RslRlVecEnv(env), agent, log_dir=None)

    env, runner = build(seed=0)
    runner.learn(2, progress=False)
    bandit = env.curriculum_manager.terms["terrain_bandit"]
    assert bandit.bandit.counts.sum() > 0  # the runner fed advantages
    env.command_manager.terms["base_velocity"].ranges["lin_vel_x"] = (-1.4, 1.4)
    env.terrain.set_cells(env.all_env_ids, levels=torch.arange(16) % 3, types=torch.arange(16) % 4)
    path = runner.save(tmp_path / "model_2.pt")

    other_env, other_runner = build(seed=1)
    other_runner.load(path)
    other_bandit = other_env.curriculum_manager.terms["terrain_bandit"]
    assert torch.equal(other_bandit.bandit.values, bandit.bandit.values)
    assert torch.equal(other_env.terrain.levels, env.terrain.levels)
    assert torch.equal(other_env.terrain.types, env.terrain.types)
    assert other_env.command_manager.terms["base_velocity"].ranges["lin_vel_x"] == pytest.approx((-1.4, 1.4))
    env.close()
    other_env.close()
