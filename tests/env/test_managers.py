# SPDX-License-Identifier: BSD-3-Clause
"""Each manager on its own, against a minimal fake env (no physics): what it computes, resets and logs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from batonlab.env.cfg import (CurriculumTermCfg, EventTermCfg, ObsGroupCfg, ObsTermCfg, RewardTermCfg,
                              TerminationTermCfg)
from batonlab.env.curriculum import CurriculumManager
from batonlab.env.events import EventManager
from batonlab.env.observations import ObservationManager
from batonlab.env.rewards import RewardManager, episode_pay_per_s
from batonlab.env.terminations import TerminationManager
from batonlab.env.terms import CurriculumTerm, ManagerTerm

N = 4


def fake_env(num_envs: int = N) -> SimpleNamespace:
    generator = torch.Generator().manual_seed(0)
    env = SimpleNamespace(
        num_envs=num_envs, device="cpu", step_dt=0.02, max_episode_length=50, max_episode_length_s=1.0,
        episode_length_buf=torch.zeros(num_envs, dtype=torch.long), all_env_ids=torch.arange(num_envs),
        sim=SimpleNamespace(diverged=torch.zeros(num_envs, dtype=torch.bool)),
        state=torch.arange(num_envs, dtype=torch.float32),
    )
    env.uniform = lambda shape, low, high: low + (high - low) * torch.rand(shape, generator=generator)
    env.normal = lambda shape: torch.randn(shape, generator=generator)
    return env


def state(env) -> torch.Tensor:
    return env.state


def state_squared(env, scale: float = 1.0) -> torch.Tensor:
    return scale * env.state**2


class Counter(ManagerTerm):
    """A stateful term: counts its calls per env, reset per env."""

    def __init__(self, env):
        self.count = torch.zeros(env.num_envs)

    def __call__(self, env) -> torch.Tensor:
        self.count += 1
        return self.count.clone()

    def reset(self, env_ids) -> None:
        self.count[env_ids] = 0


# Rewards.


def test_reward_is_the_weighted_sum_times_dt_with_per_term_episode_sums():
    env = fake_env()
    manager = RewardManager(env, {"linear": RewardTermCfg(state, weight=2.0),
                                  "quadratic": RewardTermCfg(state_squared, {"scale": 0.5}, weight=-1.0)})
    reward = manager.compute(env.step_dt)
    expected = (2.0 * env.state - 0.5 * env.state**2) * env.step_dt
    torch.testing.assert_close(reward, expected)
    manager.compute(env.step_dt)
    log = manager.reset(torch.tensor([3]))
    assert log["Episode_Reward/linear"] == pytest.approx(2 * 2.0 * 3.0 * env.step_dt / env.max_episode_length_s)
    assert manager.episode_sums["linear"][3] == 0 and manager.episode_sums["linear"][2] > 0


def test_raw_episode_sums_ignore_the_weights_and_their_changes_mid_episode():
    env = fake_env()
    cfgs = {"linear": RewardTermCfg(state, weight=2.0)}
    manager = RewardManager(env, cfgs)
    manager.compute(env.step_dt)
    cfgs["linear"].weight = 0.5  # a curriculum rescales it mid-episode
    manager.compute(env.step_dt)
    torch.testing.assert_close(manager.episode_raw_sums["linear"], 2 * env.state * env.step_dt)
    torch.testing.assert_close(manager.episode_sums["linear"], 2.5 * env.state * env.step_dt)
    pay = episode_pay_per_s(SimpleNamespace(reward_manager=manager, episode_length_buf=torch.full_like(env.state, 2),
                                            step_dt=env.step_dt), torch.arange(len(env.state)), {"linear": 3.0})
    torch.testing.assert_close(pay, 3.0 * env.state)
    manager.reset(torch.tensor([3]))
    assert manager.episode_raw_sums["linear"][3] == 0 and manager.episode_raw_sums["linear"][2] > 0


def test_zero_weight_terms_are_kept_and_a_curriculum_can_raise_them():
    env = fake_env()
    cfgs = {"linear": RewardTermCfg(state, weight=1.0), "later": RewardTermCfg(Counter, weight=0.0)}
    manager = RewardManager(env, cfgs)
    assert "later" in manager.terms, "a zero-weight term is built"
    torch.testing.assert_close(manager.compute(env.step_dt), env.state * env.step_dt)
    cfgs["later"].weight = 1.0  # what a curriculum does
    reward = manager.compute(env.step_dt)
    torch.testing.assert_close(reward, (env.state + 2.0) * env.step_dt, msg="raised weight, and the stateful term kept counting")


def test_a_reward_term_of_the_wrong_shape_is_named():
    env = fake_env()
    manager = RewardManager(env, {"bad": RewardTermCfg(lambda env: torch.zeros(env.num_envs, 2))})
    with pytest.raises(ValueError, match="reward term 'bad' must return"):
        manager.compute(env.step_dt)


def test_bad_term_params_fail_when_the_manager_is_built():
    with pytest.raises(TypeError, match=r"rewards\['quadratic'\].*accepts \['scale'\]"):
        RewardManager(fake_env(), {"quadratic": RewardTermCfg(state_squared, {"scael": 0.5})})


# Terminations.


def test_time_outs_truncate_failures_terminate_and_a_failure_on_the_last_step_wins():
    env = fake_env()
    manager = TerminationManager(env, {
        "fell": TerminationTermCfg(lambda env: env.state >= 2),
        "left_area": TerminationTermCfg(lambda env: env.state == 1, time_out=True),
    })
    env.episode_length_buf[:] = torch.tensor([50, 0, 50, 0])
    env.sim.diverged[0] = True
    terminated, truncated = manager.compute()
    assert terminated.tolist() == [True, False, True, True]
    assert truncated.tolist() == [False, True, False, False], "env 2 timed out and fell: a failure"
    log = manager.reset(torch.arange(N))
    assert log["Episode_Termination/physics_diverged"] == pytest.approx(0.25)
    assert log["Episode_Termination/fell"] == pytest.approx(0.5)


# Observations.


def test_observations_are_noised_clipped_scaled_and_stacked_with_a_fresh_history_after_reset():
    env = fake_env()
    group = ObsGroupCfg({"state": ObsTermCfg(state, clip=(0.0, 2.0), scale=10.0, history_length=3),
                         "squared": ObsTermCfg(state_squared)})
    manager = ObservationManager(env, {"policy": group})
    assert manager.group_dim("policy") == 3 + 1
    first = manager.compute()["policy"]
    torch.testing.assert_close(first[:, :3], (env.state.clamp(0, 2) * 10).unsqueeze(1).repeat(1, 3),
                               msg="a fresh history is filled with the current frame")
    env.state = env.state + 1
    second = manager.compute()["policy"]
    assert second[1, :3].tolist() == [10.0, 10.0, 20.0], "oldest frame first"
    manager.reset(torch.tensor([1]))
    env.state = env.state + 1
    third = manager.compute()["policy"]
    assert third[1, :3].tolist() == [20.0, 20.0, 20.0] and third[0, :3].tolist() == [0.0, 10.0, 20.0]
    noisy = ObservationManager(env, {"policy": ObsGroupCfg({"state": ObsTermCfg(state, noise_std=0.1)}, enable_corruption=True)})
    assert not torch.equal(noisy.compute()["policy"][:, 0], env.state)


def test_an_observation_term_of_the_wrong_shape_is_named_at_build():
    env = fake_env()
    with pytest.raises(ValueError, match="observation term 'policy/bad'"):
        ObservationManager(env, {"policy": ObsGroupCfg({"bad": ObsTermCfg(lambda env: torch.zeros(3))})})


# Events and curriculum.


def test_events_fire_at_startup_on_reset_and_on_per_env_timers():
    env = fake_env()
    calls = []

    def record(mode):
        return lambda env, env_ids: calls.append((mode, env_ids.tolist()))

    manager = EventManager(env, {"startup": EventTermCfg(record("startup"), mode="startup"),
                                 "reset": EventTermCfg(record("reset"), mode="reset"),
                                 "push": EventTermCfg(record("push"), mode="interval", interval_range_s=(0.1, 0.1))})
    manager.apply("startup", env.all_env_ids)
    manager.apply("reset", torch.tensor([2]))
    for _ in range(5):
        manager.update(env.step_dt)
    assert calls == [("startup", [0, 1, 2, 3]), ("reset", [2]), ("push", [0, 1, 2, 3])]
    with pytest.raises(ValueError, match="mode must be one of"):
        EventManager(env, {"bad": EventTermCfg(record("x"), mode="sometimes")})


class LevelCurriculum(CurriculumTerm):
    def __init__(self, env, step: int = 1):
        self.level, self.step = 0, step

    def __call__(self, env, env_ids):
        self.level += self.step
        return {"level": self.level}

    def state_dict(self):
        return {"level": self.level}

    def load_state_dict(self, state):
        self.level = state["level"]


def test_curriculum_logs_and_state_round_trip_and_an_empty_manager_is_a_null_object():
    env = fake_env()
    manager = CurriculumManager(env, {"levels": CurriculumTermCfg(LevelCurriculum, {"step": 2})})
    assert manager.update(torch.tensor([0])) == {"Curriculum/levels/level": 2.0}
    restored = CurriculumManager(env, {"levels": CurriculumTermCfg(LevelCurriculum, {"step": 2})})
    restored.load_state_dict(manager.state_dict())
    assert restored.terms["levels"].level == 2
    with pytest.raises(KeyError, match="curriculum state for \\['other'\\]"):
        restored.load_state_dict({"other": {}})
    restored.load_state_dict({"other": {}, "levels": {"level": 4}}, strict=False)  # play: dropped terms are skipped
    assert restored.terms["levels"].level == 4
    empty = CurriculumManager(env, {})
    assert empty.update(torch.tensor([0])) == {} and empty.state_dict() == {}


def test_a_fixed_command_field_holds_in_every_draw_and_leaves_the_other_draws_alone():
    """`CommandTerm.fix_field` (any command term): the field keeps its value through resamples, the
    other fields are drawn exactly as without it (same random numbers), an unknown field is named."""
    from conftest import make_reach_env

    def targets(fix: bool) -> torch.Tensor:
        env = make_reach_env(num_envs=4, seed=3)
        term = env.command_manager.terms["ee_target"]
        if fix:
            term.fix_field("z", 0.25)
        draws = []
        for _ in range(3):
            term._resample(env.all_env_ids)
            draws.append(term.command.clone())
        env.close()
        return torch.stack(draws)

    free, fixed = targets(False), targets(True)
    assert (fixed[..., 2] == 0.25).all()
    assert torch.equal(fixed[..., :2], free[..., :2])
    env = make_reach_env(num_envs=1)
    with pytest.raises(KeyError, match=r"unknown field 'w' of UniformPositionCommand; fields: \['x', 'y', 'z'\]"):
        env.command_manager.terms["ee_target"].fix_field("w", 0.0)
    env.close()


def test_a_command_counts_the_time_since_each_env_drew_it():
    """`CommandTerm.time_since_draw`: grows by dt per update, 0 again for exactly the envs that draw anew."""
    from conftest import make_reach_env

    env = make_reach_env(num_envs=3, seed=0)
    term = env.command_manager.terms["ee_target"]
    term.time_left[:] = torch.tensor([0.03, 10.0, 10.0])
    term.time_since_draw.zero_()
    for _ in range(3):
        term.update(0.02)
    assert term.time_since_draw.tolist() == pytest.approx([0.02, 0.06, 0.06])  # env 0 drew at the 2nd update
    env.close()


# Term contracts.


class NotATerm:
    def __init__(self, env):
        pass

    def __call__(self, env):
        return env.state


class CountsResets(ManagerTerm):
    """A stateful term of any kind: records the envs it was told to reset."""

    def __init__(self, env):
        self.reset_ids: list[list[int]] = []

    def __call__(self, env, *env_ids):
        return torch.zeros(env.num_envs, dtype=torch.bool)

    def reset(self, env_ids) -> None:
        self.reset_ids.append(env_ids.tolist())


def test_class_terms_derive_from_their_kind_and_every_manager_resets_its_terms():
    """A class term is refused unless it derives from its kind's base (the manager calls its hooks
    without asking), a privilege must be a class, a curriculum function has the no-op hooks, and the
    event and termination managers reset their stateful terms like the reward manager does."""
    from batonlab.env.actions import ActionManager
    from batonlab.env.cfg import ActionTermCfg, PrivilegeTermCfg
    from batonlab.env.privileges import PrivilegeManager

    env = fake_env()
    with pytest.raises(TypeError, match=r"rewards\['bad'\]: .*NotATerm must derive from batonlab.env.terms.ManagerTerm"):
        RewardManager(env, {"bad": RewardTermCfg(NotATerm)})
    with pytest.raises(TypeError, match=r"curriculum\['bad'\]: .*LevelCurriculum.* must derive from .*CurriculumTerm"):
        CurriculumManager(env, {"bad": CurriculumTermCfg(type("LevelCurriculum", (ManagerTerm,), {}))})
    with pytest.raises(TypeError, match=r"privileges\['push'\]: .*state is a function; .* deriving from .*PrivilegeTerm"):
        PrivilegeManager(env, {"push": PrivilegeTermCfg(state)}, level=1.0)
    with pytest.raises(TypeError, match=r"actions\['arm'\]: .*NotATerm.* must be a class deriving from batonlab.env.actions.ActionTerm"):
        ActionManager(env, {"arm": ActionTermCfg(NotATerm, joints=("j1",))})

    curriculum = CurriculumManager(env, {"plain": CurriculumTermCfg(lambda env, env_ids: 1.0)})
    curriculum.observe_advantages(torch.ones(3, N))
    assert curriculum.update(torch.tensor([0])) == {"Curriculum/plain": 1.0} and curriculum.state_dict() == {}

    events = EventManager(env, {"e": EventTermCfg(CountsResets, mode="reset")})
    terminations = TerminationManager(env, {"t": TerminationTermCfg(CountsResets)})
    events.reset(torch.tensor([1, 3]))
    terminations.compute()
    terminations.reset(torch.tensor([2]))
    assert events.terms["e"].reset_ids == [[1, 3]] and terminations.terms["t"].reset_ids == [[2]]
