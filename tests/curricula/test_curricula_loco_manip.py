# SPDX-License-Identifier: BSD-3-Clause
"""Curricula of whole-body loco-manipulation: the arm-workspace target curriculum, the reward-group
balance and the cost-limit schedule. Each rule on synthetic numbers, then each term inside a real
wheel-legged env (wl_loco_manip; wl_velocity with an end-effector target, arm reward and costs),
driven through the env's own resets with set episode sums, its state through save and load, and all
three together in a stepping wl_loco_manip env."""

from __future__ import annotations

import io
import math

import pytest
import torch

from batonlab.curricula.arm_workspace import (
    HOLD,
    NARROW,
    WIDEN,
    ArmWorkspaceCurriculum,
    start_ranges,
    step_range,
    workspace_decision,
    workspace_progress,
)
from batonlab.curricula.cost_limits import CostLimitSchedule, scheduled_limits
from batonlab.curricula.reward_balance import RewardBalanceCurriculum, balance_scales
from batonlab.env.cfg import CommandTermCfg, CostTermCfg, CurriculumTermCfg, RewardTermCfg
from batonlab.commands.ee_target import EndEffectorTargetCommand, cartesian_to_spherical
from batonlab.env.env import BatonEnv
from batonlab.rewards import locomotion, regularizers, tracking
from batonlab.robots.wheel_legged import arm_geometry
from batonlab.tasks import make_task_cfg
from batonlab.tasks.wl_loco_manip import TARGET_LIMITS, TARGET_START_SPAN

LIMITS = {"radius": (0.05, 0.6), "pitch": (-1.0, 1.4), "yaw": (-1.5, 1.5)}
"""Target ranges of the end-effector command added to wl_velocity [m, rad, rad]."""
EE_TRACK_WEIGHT = 1.5


def _roundtrip(state: dict) -> dict:
    """What a checkpoint does to a state dict: torch.save, then torch.load(weights_only=True)."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=True)


# Rules on synthetic statistics.


def test_workspace_rule_widens_above_the_fraction_narrows_below_and_stays_between_start_and_limits():
    assert workspace_decision(0.85, fraction=0.8, narrow_fraction=0.4) == WIDEN
    assert workspace_decision(0.8, fraction=0.8, narrow_fraction=0.4) == HOLD  # must exceed
    assert workspace_decision(0.5, fraction=0.8, narrow_fraction=0.4) == HOLD
    assert workspace_decision(0.3, fraction=0.8, narrow_fraction=0.4) == NARROW
    assert workspace_decision(0.0, fraction=0.8, narrow_fraction=None) == HOLD  # narrowing disabled

    start, limit = (0.1, 0.3), (0.0, 0.5)
    assert step_range((0.1, 0.3), start, limit, 0.15, WIDEN) == pytest.approx((0.0, 0.45))  # low side clamped
    assert step_range((0.0, 0.45), start, limit, 0.15, WIDEN) == pytest.approx((0.0, 0.5))  # both at the limit
    assert step_range((0.0, 0.5), start, limit, 0.15, HOLD) == (0.0, 0.5)
    assert step_range((0.0, 0.5), start, limit, 0.15, NARROW) == pytest.approx((0.1, 0.35))  # never inside start
    assert step_range((0.1, 0.35), start, limit, 0.15, NARROW) == pytest.approx((0.1, 0.3))

    # Start spans are centred on the stowed value and clipped to the limits.
    starts = start_ranges({"radius": 0.15, "yaw": 1.45}, {"radius": 0.03, "yaw": 0.1}, LIMITS)
    assert starts["radius"] == pytest.approx((0.12, 0.18)) and starts["yaw"] == pytest.approx((1.35, 1.5))

    limits = {"radius": (0.0, 1.0), "yaw": (-1.0, 1.0)}
    start_r = {"radius": (0.4, 0.6), "yaw": (-0.2, 0.2)}
    assert workspace_progress(start_r, start_r, limits) == 0.0
    assert workspace_progress(limits, start_r, limits) == 1.0
    # Radius half-way (width 0.6 of 0.2..1.0), yaw a quarter of the way (0.8 of 0.4..2.0).
    assert workspace_progress({"radius": (0.2, 0.8), "yaw": (-0.4, 0.4)}, start_r, limits) == pytest.approx(0.375)


def test_balance_rule_gives_the_weaker_group_more_weight_and_the_scales_average_one():
    # Unclamped: the scales follow (1 - p + eps)^alpha exactly and average 1.
    scales = balance_scales(torch.tensor([0.9, 0.3]), alpha=1.0, eps=0.05, min_scale=0.01, max_scale=10.0)
    assert scales[1] > 1.0 > scales[0]
    assert scales.mean().item() == pytest.approx(1.0)
    assert (scales[1] / scales[0]).item() == pytest.approx((1 - 0.3 + 0.05) / (1 - 0.9 + 0.05))
    squared = balance_scales(torch.tensor([0.9, 0.3]), alpha=2.0, eps=0.05, min_scale=0.01, max_scale=10.0)
    assert (squared[1] / squared[0]).item() == pytest.approx(((1 - 0.3 + 0.05) / (1 - 0.9 + 0.05)) ** 2)

    # Equal performance: equal weights, whatever the level.
    assert torch.allclose(balance_scales(torch.tensor([0.2, 0.2, 0.2])), torch.ones(3))

    # Clamped: the bounds hold and the others take up the rest, so the mean stays 1.
    clamped = balance_scales(torch.tensor([1.0, 0.0]), alpha=2.0, eps=0.05, min_scale=0.5, max_scale=2.0)
    assert clamped.tolist() == pytest.approx([0.5, 1.5])
    three = balance_scales(torch.tensor([1.0, 0.0, 0.5]), alpha=3.0, eps=0.01, min_scale=0.5, max_scale=1.8)
    assert three.min().item() >= 0.5 - 1e-9 and three.max().item() <= 1.8 + 1e-9
    assert three.mean().item() == pytest.approx(1.0)
    assert three[1] > three[2] > three[0]  # ordered by weakness
    # Performance outside [0, 1] (penalties) is clamped, never a negative scale.
    assert torch.all(balance_scales(torch.tensor([-0.5, 1.4])) > 0)


@pytest.mark.parametrize("shape", ["linear", "geometric"])
def test_schedule_rule_starts_loose_ends_at_the_final_limits_and_only_tightens(shape):
    start, final = torch.tensor([0.5, 2.0], dtype=torch.float64), torch.tensor([0.05, 0.5], dtype=torch.float64)
    values = torch.stack([scheduled_limits(start, final, step, 100, shape) for step in range(0, 131, 10)])
    assert torch.allclose(values[0], start)
    assert torch.allclose(values[10], final) and torch.allclose(values[-1], final)  # step 100 and after
    assert torch.all(values.diff(dim=0) <= 1e-12)
    middle = scheduled_limits(start, final, 50, 100, shape)
    expected = (start + final) / 2 if shape == "linear" else (start * final).sqrt()
    assert torch.allclose(middle, expected)
    assert torch.allclose(scheduled_limits(start, final, 0, 0, shape), final)  # no duration: final at once
    with pytest.raises(ValueError, match="shape"):
        scheduled_limits(start, final, 0, 100, "cosine")


# The terms in real wheel-legged envs: wl_loco_manip for the arm workspace; wl_velocity (20 s episodes)
# with an end-effector target, an arm tracking reward and two costs for the balance and the schedule.


def _wl_env(curriculum: dict[str, CurriculumTermCfg], seed: int = 0) -> BatonEnv:
    """wl_velocity (8 envs) plus the `ee_target` command, an `ee_track` reward and costs `tilt`, `action_rate`."""
    cfg = make_task_cfg("wl_velocity")
    cfg.num_envs, cfg.seed = 8, seed
    cfg.scene.terrain.num_levels, cfg.scene.terrain.tile_size = 2, 3.0
    geometry = arm_geometry()
    cfg.commands["ee_target"] = CommandTermCfg(
        cls=EndEffectorTargetCommand,
        resampling_time_range_s=(0.1, 0.1),
        params={
            "radius_range": LIMITS["radius"],
            "pitch_range": LIMITS["pitch"],
            "yaw_range": LIMITS["yaw"],
            "shoulder": geometry.shoulder,
            "stowed_position": geometry.stowed_ee,
            "keep_out_box": ((-0.3, 0.3), (-0.3, 0.3), (-1.0, -0.05)),
            "min_z": -0.6,
            "transition_s": 0.1,
            "ee_sensor": "ee_pos_b",
        },
    )
    cfg.rewards["ee_track"] = RewardTermCfg(
        func=tracking.position_command_error_exp,
        params={"command": "ee_target", "sensor": "ee_pos_b", "std": 0.1},
        weight=EE_TRACK_WEIGHT,
    )
    cfg.costs = {
        "tilt": CostTermCfg(func=locomotion.flat_orientation_l2, limit=0.05),
        "action_rate": CostTermCfg(func=regularizers.action_rate_l2, limit=1.0),
    }
    cfg.curriculum = curriculum
    return BatonEnv(cfg)


def _loco_manip_env(curriculum: dict[str, CurriculumTermCfg], episode_length_s: float | None = None,
                    seed: int = 0) -> BatonEnv:
    """The real `wl_loco_manip` task (8 envs) with the given curricula."""
    cfg = make_task_cfg("wl_loco_manip")
    cfg.num_envs, cfg.seed = 8, seed
    if episode_length_s is not None:
        cfg.episode_length_s = episode_length_s
    cfg.curriculum = curriculum
    return BatonEnv(cfg)


ARM_TERMS = ["ee_track", "ee_track_fine"]
"""wl_loco_manip's arm tracking terms (tanh and exp kernels, each paying at most its weight per second)."""
STEP = {"radius": 0.05, "pitch": 0.2, "yaw": 0.25}


def _workspace_cfg(**overrides) -> CurriculumTermCfg:
    params = {"command": "ee_target", "reward_terms": ARM_TERMS, "limits": TARGET_LIMITS,
              "start_span": TARGET_START_SPAN, "step": STEP, "fraction": 0.8}
    return CurriculumTermCfg(func=ArmWorkspaceCurriculum, params={**params, **overrides})


def _arm_sums(env: BatonEnv, score: float, seconds: float = 12.0) -> dict[str, float]:
    """Episode sums of the arm terms for a normalised tracking score over `seconds`."""
    return {name: score * env.reward_manager.cfgs[name].weight * seconds for name in ARM_TERMS}


def _finish_episodes(env: BatonEnv, sums: dict[str, float], seconds: float | None = None,
                     raw_sums: dict[str, float] | None = None) -> dict:
    """End every env's episode (`seconds` long, default the time limit) with the given weighted
    episode sums (the same for all envs) through the env's own reset; returns the reset's log.

    The unweighted sums are `raw_sums`, by default those of an episode paid at the weights in force."""
    env.episode_length_buf[:] = round((seconds or env.max_episode_length_s) / env.step_dt)
    manager = env.reward_manager
    for name, value in sums.items():
        manager.episode_sums[name][:] = value
        weight = manager.cfgs[name].weight
        manager.episode_raw_sums[name][:] = value / weight if weight else 0.0
    for name, value in (raw_sums or {}).items():
        manager.episode_raw_sums[name][:] = value
    env.reset()
    return env.extras["log"]


def _widened(current: tuple[float, float], key: str) -> tuple[float, float]:
    limit = TARGET_LIMITS[key]
    return max(limit[0], current[0] - STEP[key]), min(limit[1], current[1] + STEP[key])


def _assert_draws_inside(command: EndEffectorTargetCommand) -> None:
    """The command's goals, back in spherical coordinates, lie inside its live ranges (draws with no
    candidate clear of the robot are NaN and stay where they are)."""
    goals = command.sample(256)
    goals = goals[~goals.isnan().any(dim=1)]
    assert len(goals) > 128
    spherical = cartesian_to_spherical(goals, command.shoulder)
    for key, (low, high) in command.ranges.items():
        assert torch.all(spherical[key] >= low - 1e-5) and torch.all(spherical[key] <= high + 1e-5), key


def test_arm_workspace_starts_at_the_stowed_pose_and_the_command_draws_inside_its_ranges():
    env = _loco_manip_env({"arm_workspace": _workspace_cfg()})
    command = env.command_manager.terms["ee_target"]
    stowed = command.stowed
    for key, span in TARGET_START_SPAN.items():
        low, high = TARGET_LIMITS[key]
        assert command.ranges[key] == pytest.approx((max(low, stowed[key] - span), min(high, stowed[key] + span)))
    assert command.ranges["yaw"] == pytest.approx((-0.1, 0.1))  # the stowed arm points straight ahead
    # The command's draws (made after the curriculum set its ranges) lie in the start spans.
    _assert_draws_inside(command)
    assert env.curriculum_manager.terms["arm_workspace"].progress == 0.0
    env.close()


def test_arm_workspace_widens_on_good_tracking_once_per_window_up_to_the_limits():
    env = _loco_manip_env({"arm_workspace": _workspace_cfg()})
    term = env.curriculum_manager.terms["arm_workspace"]
    ranges = env.command_manager.terms["ee_target"].ranges
    start = dict(ranges)

    log = _finish_episodes(env, _arm_sums(env, 0.9))
    assert ranges == start  # the first window is not over yet
    assert log["Curriculum/arm_workspace/score"] == pytest.approx(0.9)
    env.common_step_counter = term.interval_steps
    log = _finish_episodes(env, _arm_sums(env, 0.9))
    for key in TARGET_LIMITS:
        assert ranges[key] == pytest.approx(_widened(start[key], key))
    assert log["Curriculum/arm_workspace/widenings"] == 1.0
    assert log["Curriculum/arm_workspace/yaw_low"] == pytest.approx(-0.35)
    assert log["Curriculum/arm_workspace/radius_high"] == pytest.approx(ranges["radius"][1])
    assert 0.0 < log["Curriculum/arm_workspace/progress"] < 1.0
    env.common_step_counter += 1
    _finish_episodes(env, _arm_sums(env, 0.9))
    assert term.num_widenings == 1  # at most once per window

    # Poor tracking (60 %) holds the ranges.
    env.common_step_counter += term.interval_steps
    before = dict(ranges)
    _finish_episodes(env, _arm_sums(env, 0.6))
    assert ranges == before

    # Widening all the way ends at the limits, never beyond.
    for _ in range(20):
        env.common_step_counter += term.interval_steps
        log = _finish_episodes(env, _arm_sums(env, 0.9))
    assert all(ranges[key] == pytest.approx(TARGET_LIMITS[key]) for key in TARGET_LIMITS)
    assert log["Curriculum/arm_workspace/progress"] == pytest.approx(1.0)
    env.close()


def test_arm_workspace_judges_per_second_over_all_listed_terms_and_ignores_envs_without_an_episode():
    env = _loco_manip_env({"arm_workspace": _workspace_cfg()})
    term = env.curriculum_manager.terms["arm_workspace"]
    ranges = env.command_manager.terms["ee_target"].ranges
    start = dict(ranges)
    # A full reset before any step judges nothing (sums and lengths are zero).
    env.common_step_counter = term.interval_steps
    env.reset()
    assert term._count == 0 and ranges == start
    # A perfect coarse term and a silent fine one: the coarse weight's share per second, below the fraction.
    coarse, fine = (env.reward_manager.cfgs[name].weight for name in ARM_TERMS)
    assert coarse / (coarse + fine) < _workspace_cfg().params["fraction"]
    log = _finish_episodes(env, {"ee_track": coarse * 12.0, "ee_track_fine": 0.0})
    assert log["Curriculum/arm_workspace/score"] == pytest.approx(coarse / (coarse + fine)) and ranges == start
    # Half the sum in half the time (an episode cut short) is the same good tracking.
    env.common_step_counter += term.interval_steps
    _finish_episodes(env, _arm_sums(env, 0.9, seconds=6.0), seconds=6.0)
    assert term.num_widenings == 1
    env.close()


def test_arm_workspace_score_is_blind_to_weights_rescaled_during_the_episode():
    env = _loco_manip_env({"arm_workspace": _workspace_cfg()})
    cfgs = env.reward_manager.cfgs
    # Tracking at 0.7 of the maximum for 12 s, paid at half the weights for 6 s, then at 1.5x for
    # 6 s (a reward balance's swing), judged after the balance has left the weights at 1.5x.
    raw = {name: 0.7 * 12.0 for name in ARM_TERMS}
    paid = {name: 0.7 * cfgs[name].weight * (0.5 * 6.0 + 1.5 * 6.0) for name in ARM_TERMS}
    for name in ARM_TERMS:
        cfgs[name].weight *= 1.5
    log = _finish_episodes(env, paid, raw_sums=raw)
    # Dividing the paid sums by the weights in force would read 0.7 x 12/18 = 0.47.
    assert log["Curriculum/arm_workspace/score"] == pytest.approx(0.7)
    env.close()


def test_arm_workspace_narrows_back_on_poor_tracking_but_not_inside_the_start_spans():
    env = _loco_manip_env({"arm_workspace": _workspace_cfg(narrow_fraction=0.4)})
    term = env.curriculum_manager.terms["arm_workspace"]
    ranges = env.command_manager.terms["ee_target"].ranges
    start = dict(ranges)
    for _ in range(2):
        env.common_step_counter += term.interval_steps
        _finish_episodes(env, _arm_sums(env, 0.9))
    widened = dict(ranges)
    env.common_step_counter += term.interval_steps
    log = _finish_episodes(env, _arm_sums(env, 0.2))
    for key in TARGET_LIMITS:
        expected = (min(start[key][0], widened[key][0] + STEP[key]), max(start[key][1], widened[key][1] - STEP[key]))
        assert ranges[key] == pytest.approx(expected)
    assert ranges["yaw"] == pytest.approx((-0.35, 0.35))
    assert log["Curriculum/arm_workspace/narrowings"] == 1.0
    for _ in range(3):
        env.common_step_counter += term.interval_steps
        _finish_episodes(env, _arm_sums(env, 0.0))
    assert all(ranges[key] == pytest.approx(start[key]) for key in TARGET_LIMITS)
    assert term.progress == 0.0
    env.close()


def test_arm_workspace_state_survives_save_and_load():
    env = _loco_manip_env({"arm_workspace": _workspace_cfg()})
    term = env.curriculum_manager.terms["arm_workspace"]
    env.common_step_counter = term.interval_steps
    _finish_episodes(env, _arm_sums(env, 0.95))
    state = _roundtrip(env.curriculum_manager.state_dict())

    other = _loco_manip_env({"arm_workspace": _workspace_cfg()}, seed=1)
    other.curriculum_manager.load_state_dict(state)
    other_term = other.curriculum_manager.terms["arm_workspace"]
    for key in TARGET_LIMITS:
        assert other.command_manager.terms["ee_target"].ranges[key] == pytest.approx(
            env.command_manager.terms["ee_target"].ranges[key], abs=1e-12)
    assert other_term.num_widenings == 1 and other_term.score == pytest.approx(0.95)
    assert other_term._last_update_step == term.interval_steps
    assert other_term.progress == pytest.approx(term.progress)
    env.close()
    other.close()


def test_arm_workspace_rejects_unknown_names_and_bad_params():
    env = _loco_manip_env({})
    args = (TARGET_LIMITS, TARGET_START_SPAN, STEP)
    with pytest.raises(KeyError, match=r"unknown command 'ee_taget'.*base_velocity.*ee_target"):
        ArmWorkspaceCurriculum(env, "ee_taget", ARM_TERMS, *args)
    with pytest.raises(KeyError, match=r"unknown reward terms \['ee_trak'\].*ee_track_fine"):
        ArmWorkspaceCurriculum(env, "ee_target", ["ee_trak", "ee_track_fine"], *args)
    with pytest.raises(KeyError, match=r"keys must match among \['pitch', 'radius', 'yaw'\]"):
        ArmWorkspaceCurriculum(env, "ee_target", ARM_TERMS, {"roll": (-1, 1)}, {"roll": 0.1}, {"roll": 0.1})
    with pytest.raises(TypeError, match="no 'stowed'"):
        ArmWorkspaceCurriculum(env, "base_velocity", ARM_TERMS, *args)
    with pytest.raises(ValueError, match="positive weights"):
        ArmWorkspaceCurriculum(env, "ee_target", ["arm_joint_vel"], *args)
    with pytest.raises(ValueError, match="narrow_fraction"):
        ArmWorkspaceCurriculum(env, "ee_target", ARM_TERMS, *args, fraction=0.5, narrow_fraction=0.6)
    with pytest.raises(ValueError, match="outside the limits"):
        ArmWorkspaceCurriculum(env, "ee_target", ARM_TERMS, {**TARGET_LIMITS, "radius": (0.3, 0.55)}, TARGET_START_SPAN,
                               STEP)
    env.close()


# Reward balance.

BASE = ["track_lin_vel_x", "track_ang_vel_z"]
"""wl_velocity's tracking terms, weights 2.0 and 1.0."""


def _balance_cfg(**overrides) -> CurriculumTermCfg:
    params = {"groups": {"base": BASE, "arm": ["ee_track"]}, "alpha": 1.0, "eps": 0.05, "min_scale": 0.5,
              "max_scale": 2.0, "ema_rate": 0.5}
    return CurriculumTermCfg(func=RewardBalanceCurriculum, params={**params, **overrides})


def _group_sums(env: BatonEnv, p_base: float, p_arm: float, seconds: float = 20.0) -> dict[str, float]:
    """Episode sums of the groups' terms for performances p, at the weights now in force."""
    weights = {name: env.reward_manager.cfgs[name].weight for name in [*BASE, "ee_track"]}
    return {**{name: p_base * weights[name] * seconds for name in BASE}, "ee_track": p_arm * weights["ee_track"] * seconds}


def test_reward_balance_moves_weight_to_the_weaker_group_and_writes_the_weights():
    env = _wl_env({"balance": _balance_cfg()})
    term = env.curriculum_manager.terms["balance"]
    cfgs = env.reward_manager.cfgs
    log = _finish_episodes(env, _group_sums(env, p_base=0.9, p_arm=0.3))
    assert log["Curriculum/balance/scale_arm"] == 1.0  # the window is not over yet
    assert cfgs["ee_track"].weight == EE_TRACK_WEIGHT

    env.common_step_counter = term.interval_steps
    log = _finish_episodes(env, _group_sums(env, p_base=0.9, p_arm=0.3))
    assert log["Curriculum/balance/p_base"] == pytest.approx(0.9) and log["Curriculum/balance/p_arm"] == pytest.approx(0.3)
    # (0.15, 0.75) normalised to a mean of 1 is (1/3, 5/3); the base is held at 0.5, the arm takes 1.5.
    assert log["Curriculum/balance/scale_base"] == pytest.approx(0.5)
    assert log["Curriculum/balance/scale_arm"] == pytest.approx(1.5)
    assert cfgs["track_lin_vel_x"].weight == pytest.approx(1.0) and cfgs["track_ang_vel_z"].weight == pytest.approx(0.5)
    assert cfgs["ee_track"].weight == pytest.approx(1.5 * EE_TRACK_WEIGHT)
    assert cfgs["terminated"].weight == -200.0  # terms outside the groups keep their weights
    assert env.cfg.rewards["ee_track"] is cfgs["ee_track"]  # what the reward manager reads at every step

    # The same tracking at the new weights reads as the same performance (the scales are divided out).
    env.common_step_counter += term.interval_steps
    log = _finish_episodes(env, _group_sums(env, p_base=0.9, p_arm=0.3))
    assert log["Curriculum/balance/p_base"] == pytest.approx(0.9) and log["Curriculum/balance/p_arm"] == pytest.approx(0.3)

    # The arm catches up: the EMA moves half-way, the weights come back toward the task's.
    env.common_step_counter += term.interval_steps
    log = _finish_episodes(env, _group_sums(env, p_base=0.9, p_arm=0.9))
    assert log["Curriculum/balance/p_arm"] == pytest.approx(0.6)
    assert 1.0 < log["Curriculum/balance/scale_arm"] < 1.5
    assert log["Curriculum/balance/scale_base"] + log["Curriculum/balance/scale_arm"] == pytest.approx(2.0)
    env.close()


def test_reward_balance_reads_episodes_that_straddle_a_rescaling_at_the_initial_weights():
    env = _wl_env({"balance": _balance_cfg()})
    term = env.curriculum_manager.terms["balance"]
    env.common_step_counter = term.interval_steps
    _finish_episodes(env, _group_sums(env, p_base=0.9, p_arm=0.3))  # scales base 0.5, arm 1.5
    # The next episodes ran 10 s at the task's weights and 10 s at the new ones, with the same
    # tracking: their sums under mixed weights must read as the same performance.
    cfgs, initial = env.reward_manager.cfgs, term.initial
    p = {**{name: 0.9 for name in BASE}, "ee_track": 0.3}
    raw = {name: p[name] * 20.0 for name in p}
    paid = {name: p[name] * 10.0 * (initial[name] + cfgs[name].weight) for name in p}
    env.common_step_counter += term.interval_steps
    log = _finish_episodes(env, paid, raw_sums=raw)
    assert log["Curriculum/balance/p_base"] == pytest.approx(0.9) and log["Curriculum/balance/p_arm"] == pytest.approx(0.3)
    env.close()


def test_reward_balance_state_survives_save_and_load_and_rewrites_the_weights():
    env = _wl_env({"balance": _balance_cfg()})
    term = env.curriculum_manager.terms["balance"]
    env.common_step_counter = term.interval_steps
    _finish_episodes(env, _group_sums(env, p_base=0.8, p_arm=0.4))
    state = _roundtrip(env.curriculum_manager.state_dict())

    other = _wl_env({"balance": _balance_cfg()}, seed=1)
    other.curriculum_manager.load_state_dict(state)
    other_term = other.curriculum_manager.terms["balance"]
    assert torch.allclose(other_term.scales, term.scales) and torch.allclose(other_term.performance, term.performance)
    for name in [*BASE, "ee_track"]:
        assert other.reward_manager.cfgs[name].weight == pytest.approx(env.reward_manager.cfgs[name].weight)
    assert other_term.num_updates == 1
    with pytest.raises(KeyError, match="groups"):
        other_term.load_state_dict({**state["balance"], "groups": ["arm", "base"]})
    env.close()
    other.close()


def test_reward_balance_rejects_unknown_terms_and_bad_groups():
    env = _wl_env({})
    with pytest.raises(KeyError, match=r"unknown reward terms \['ee_trak'\].*track_lin_vel_x"):
        RewardBalanceCurriculum(env, {"base": BASE, "arm": ["ee_trak"]})
    with pytest.raises(ValueError, match="at least two"):
        RewardBalanceCurriculum(env, {"base": BASE})
    with pytest.raises(ValueError, match="share"):
        RewardBalanceCurriculum(env, {"base": BASE, "arm": ["ee_track", "track_lin_vel_x"]})
    with pytest.raises(ValueError, match="no positive weight"):
        RewardBalanceCurriculum(env, {"base": BASE, "penalties": ["terminated", "action_rate"]})
    with pytest.raises(ValueError, match="min_scale"):
        RewardBalanceCurriculum(env, {"base": BASE, "arm": ["ee_track"]}, min_scale=1.2)
    env.close()


# Cost-limit schedule.


def _schedule_cfg(**overrides) -> CurriculumTermCfg:
    params = {"start": {"tilt": 0.5}, "duration_steps": 100, "shape": "linear"}
    return CurriculumTermCfg(func=CostLimitSchedule, params={**params, **overrides})


def test_cost_limit_schedule_tightens_the_cost_managers_limits_in_place():
    env = _wl_env({"cost_schedule": _schedule_cfg()})
    limits = env.cost_manager.limits
    assert limits.tolist() == pytest.approx([0.5, 1.0])  # loose from the start; action_rate not scheduled
    seen = []
    for step in (0, 25, 50, 100, 150):
        env.common_step_counter = step
        log = _finish_episodes(env, {})
        seen.append(log["Curriculum/cost_schedule/limit_tilt"])
        assert log["Curriculum/cost_schedule/limit_action_rate"] == pytest.approx(1.0)
    assert seen == pytest.approx([0.5, 0.3875, 0.275, 0.05, 0.05])
    assert log["Curriculum/cost_schedule/progress"] == 1.0
    assert env.cost_manager.limits is limits  # written in place: a holder of the tensor sees the new limits
    # A counter that goes back (an env rebuilt without the checkpoint's counter) does not loosen them.
    env.common_step_counter = 10
    _finish_episodes(env, {})
    assert limits[0].item() == pytest.approx(0.05)
    env.close()


def test_cost_limit_schedule_geometric_and_state_through_save_and_load():
    env = _wl_env({"cost_schedule": _schedule_cfg(shape="geometric")})
    env.common_step_counter = 50
    log = _finish_episodes(env, {})
    assert log["Curriculum/cost_schedule/limit_tilt"] == pytest.approx(math.sqrt(0.5 * 0.05), rel=1e-5)
    state = _roundtrip(env.curriculum_manager.state_dict())

    other = _wl_env({"cost_schedule": _schedule_cfg(shape="geometric")}, seed=1)
    assert other.cost_manager.limits[0].item() == pytest.approx(0.5)
    other.curriculum_manager.load_state_dict(state)
    assert other.cost_manager.limits[0].item() == pytest.approx(math.sqrt(0.5 * 0.05), rel=1e-5)
    other.common_step_counter = 60  # what the runner restores after the curriculum, and on from there
    _finish_episodes(other, {})
    assert 0.05 < other.cost_manager.limits[0].item() < math.sqrt(0.5 * 0.05)
    env.close()
    other.close()


def test_cost_limit_schedule_rejects_unknown_costs_and_bad_limits():
    env = _wl_env({})
    with pytest.raises(KeyError, match=r"unknown cost terms \['tlit'\].*'tilt', 'action_rate'"):
        CostLimitSchedule(env, {"tlit": 0.5}, duration_steps=100)
    with pytest.raises(ValueError, match="tighter"):
        CostLimitSchedule(env, {"tilt": 0.01}, duration_steps=100)
    with pytest.raises(ValueError, match="shape"):
        CostLimitSchedule(env, {"tilt": 0.5}, duration_steps=100, shape="cosine")
    env.cost_manager.limits[0] = 0.0  # a zero final limit has no geometric path to it
    with pytest.raises(ValueError, match="positive limits"):
        CostLimitSchedule(env, {"tilt": 0.5}, duration_steps=100, shape="geometric")
    env.close()


# All three together in the real task: episodes end by the env's own time limit.


def test_the_three_curricula_run_together_in_a_stepping_wl_loco_manip_env():
    env = _loco_manip_env(
        {
            "arm_workspace": _workspace_cfg(fraction=0.0, interval_s=0.2),  # any tracking widens: exercises the writes
            "balance": CurriculumTermCfg(func=RewardBalanceCurriculum,
                                         params={"groups": {"base": BASE, "arm": ARM_TERMS}, "interval_s": 0.2}),
            "cost_schedule": CurriculumTermCfg(
                func=CostLimitSchedule,
                params={"start": {"arm_torque": 0.2, "ee_workspace": 0.2, "link_contact": 0.1}, "duration_steps": 60},
            ),
        },
        episode_length_s=0.3,
    )
    command = env.command_manager.terms["ee_target"]
    assert env.cost_manager.limits.tolist() == pytest.approx([0.2, 0.2, 0.1])  # loose from the first step
    env.reset()
    logs = []
    actions = torch.zeros(env.num_envs, env.num_actions)
    for _ in range(75):
        _, _, _, _, extras = env.step(actions)
        if "Curriculum/balance/p_arm" in extras["log"]:
            logs.append(extras["log"])
    assert len(logs) >= 4  # every 15 steps all 8 envs time out together (or fall earlier)
    for log in logs:
        assert 0.0 <= log["Curriculum/balance/p_arm"] <= 1.0 and 0.0 <= log["Curriculum/balance/p_base"] <= 1.0
        assert log["Curriculum/balance/scale_arm"] + log["Curriculum/balance/scale_base"] == pytest.approx(2.0)
        assert 0.0 < log["Curriculum/arm_workspace/score"] <= 1.0  # a stowed arm near stowed targets tracks
    torque = [log["Curriculum/cost_schedule/limit_arm_torque"] for log in logs]
    assert all(b <= a for a, b in zip(torque, torque[1:])) and torque[-1] == pytest.approx(0.01)
    assert env.cost_manager.limits.tolist() == pytest.approx([0.01, 0.01, 0.005])  # the task's limits
    widths = [log["Curriculum/arm_workspace/yaw_high"] - log["Curriculum/arm_workspace/yaw_low"] for log in logs]
    assert widths[-1] > widths[0]
    for name in ARM_TERMS:  # the balance wrote the arm weights the reward manager now reads
        assert env.reward_manager.cfgs[name].weight == pytest.approx(
            env.curriculum_manager.terms["balance"].initial[name] * logs[-1]["Curriculum/balance/scale_arm"])
    # The command keeps drawing inside the live ranges as they widen.
    _assert_draws_inside(command)
    env.close()
