# SPDX-License-Identifier: BSD-3-Clause
"""Privileges on real MuJoCo worlds: virtual forces follow λ and vanish at 0, relaxed contacts switch
back on, the schedule lowers λ only on evidence, observation delays, and λ in checkpoints."""

from __future__ import annotations

import pytest
import torch

from batonlab.curricula.privilege import PrivilegeSchedule, ScheduleState, deadline_ceiling, schedule_rule
from batonlab.env.cfg import ActionTermCfg, CurriculumTermCfg, PrivilegeTermCfg
from batonlab.env.env import BatonEnv
from batonlab.observations.objects import body_pos
from batonlab.privileges.relaxed_contacts import DISABLED_MARGIN, RelaxedContacts
from batonlab.privileges.virtual_forces import VirtualForceAction
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_agent_cfg, make_task_cfg


def lift_env(num_envs: int = 4, level: float = 1.0, backend: str = "mujoco", **changes) -> BatonEnv:
    cfg = make_task_cfg("arm_lift")
    cfg.num_envs, cfg.privilege_level, cfg.sim.backend = num_envs, level, backend
    cfg.curriculum = {}
    for key, value in changes.items():
        setattr(cfg, key, value)
    return BatonEnv(cfg)


def hold_action(env: BatonEnv) -> torch.Tensor:
    return torch.zeros(env.num_envs, env.num_actions)


def place_object_below_tool(env: BatonEnv, offset: float = 0.05) -> None:
    """Teleport each env's cube to `offset` below the tool point (inside the attraction radius), at rest."""
    qpos, qvel = env.sim.qpos.clone(), torch.zeros_like(env.sim.qvel)
    adr = int(env.scene.model.jnt_qposadr[env.scene.model.joint("object").id])
    qpos[:, adr : adr + 3] = env.sim.sensor("ee_pos_w") - torch.tensor([0.0, 0.0, offset])
    env.sim.reset(env.all_env_ids, qpos, qvel)


def test_attraction_force_scales_with_the_level_and_vanishes_at_zero():
    env = lift_env()
    term = env.privilege_manager.terms["attraction"]
    place_object_below_tool(env)
    forces = {}
    for level in (1.0, 0.5, 0.0):  # the same state at every level
        env.privilege_manager.set_level(level)
        env.privilege_manager.apply()
        forces[level] = env.sim.xfrc_applied[:, env.scene.body_id("object"), :3].clone()
        torch.testing.assert_close(forces[level], term.force)
    assert (forces[1.0][:, 2] > 1.0).all(), "the pull toward the tool point (above the cube) must point up"
    torch.testing.assert_close(forces[0.5], 0.5 * forces[1.0])
    assert torch.count_nonzero(forces[0.0]) == 0
    # Inside env.step: the force is there at λ = 1 and gone at λ = 0 (nothing else pushes the worlds).
    env.privilege_manager.set_level(1.0)
    env.step(hold_action(env))
    assert torch.count_nonzero(env.sim.xfrc_applied) > 0
    env.privilege_manager.set_level(0.0)
    env.step(hold_action(env))
    assert torch.count_nonzero(env.sim.xfrc_applied) == 0


def test_attraction_carries_the_cube_with_the_tool_at_level_one_and_not_at_zero():
    gaps = {}
    for level in (1.0, 0.0):
        env = lift_env(level=level)
        place_object_below_tool(env, offset=0.03)
        for _ in range(15):  # 0.3 s; the arm settles toward its home pose meanwhile
            env.step(hold_action(env))
        gaps[level] = (env.sim.sensor("ee_pos_w") - body_pos(env, "object")).norm(dim=1)
    assert (gaps[1.0] < 0.05).all(), f"at λ = 1 the pull keeps the cube at the tool point: {gaps[1.0]}"
    assert (gaps[0.0] > 0.1).all(), f"at λ = 0 the cube falls away: {gaps[0.0]}"


def test_virtual_force_actions_scale_with_the_level_and_are_the_last_action_dims():
    cfg_actions = make_task_cfg("arm_lift").actions
    cfg_actions["virtual_force"] = ActionTermCfg(cls=VirtualForceAction, joints=(), params={"body": "object", "max_force": 4.0})
    rises = {}
    for level in (1.0, 0.5, 0.0):
        env = lift_env(level=level, actions=cfg_actions)
        assert env.num_actions == 10 and env.action_manager.privileged_dim == 3
        assert list(env.action_manager.deployable_terms) == ["arm", "gripper"]
        action = hold_action(env)
        action[:, -1] = 1.0  # full upward force
        start = body_pos(env, "object")[:, 2].clone()
        env.step(action)
        force = env.sim.xfrc_applied[:, env.scene.body_id("object"), :3]
        torch.testing.assert_close(force, torch.tensor([0.0, 0.0, 4.0 * level]).expand_as(force))
        for _ in range(10):
            env.step(action)
        rises[level] = (body_pos(env, "object")[:, 2] - start).min().item()
    assert rises[1.0] > 0.05, "4 N up on a cube of at most 0.3 kg lifts it"
    assert abs(rises[0.0]) < 0.005, "at λ = 0 the privileged action does nothing"


def test_privileged_action_terms_must_come_last():
    cfg = make_task_cfg("arm_lift")
    actions = {"virtual_force": ActionTermCfg(cls=VirtualForceAction, joints=(), params={"body": "object", "max_force": 1.0}),
               **cfg.actions}
    with pytest.raises(ValueError, match="privileged action terms must come after"):
        lift_env(actions=actions)


def object_table_env(level: float, backend: str = "mujoco") -> BatonEnv:
    """arm_lift whose cube–table pair is switched off while λ > 0.5: the cube falls through the table."""
    privileges = {"cube_through_table": PrivilegeTermCfg(func=RelaxedContacts, params={"pairs": ("object_table",), "threshold": 0.5})}
    return lift_env(num_envs=2, level=level, backend=backend, privileges=privileges, terminations={})


def settle(env: BatonEnv, steps: int = 25) -> torch.Tensor:
    for _ in range(steps):
        env.step(hold_action(env))
    return body_pos(env, "object")[:, 2]


@pytest.mark.parametrize("backend", ["mujoco", pytest.param("mujoco_warp", marks=pytest.mark.slow)])
def test_relaxed_contacts_switch_off_above_the_threshold_and_back_on_at_reset(backend):
    env = object_table_env(level=1.0, backend=backend)
    pair = env.privilege_manager.terms["cube_through_table"].pair_ids
    assert (env.sim.get_params("pair_margin")[:, pair] == DISABLED_MARGIN).all()
    assert (settle(env) < -0.05).all(), "with the pair off, the cube falls through the table"
    # λ falls below the threshold: the pair comes back on at each env's next reset, not mid-episode.
    env.privilege_manager.set_level(0.25)
    assert (env.sim.get_params("pair_margin")[:, pair] == DISABLED_MARGIN).all()
    env.reset()
    assert (env.sim.get_params("pair_margin")[:, pair] == 0.0).all()
    heights = settle(env)
    rest = env.event_manager.terms["object"].half_height
    torch.testing.assert_close(heights, rest, atol=0.003, rtol=0.0)


def test_gripper_table_pairs_are_relaxed_in_arm_lift_and_restored_at_zero():
    env = lift_env(level=1.0)
    term = env.privilege_manager.terms["gripper_through_table"]
    assert term.relaxed.all()
    env.privilege_manager.set_level(0.0, now=True)  # evaluation: at once, every env
    assert not term.relaxed.any()
    assert (env.sim.get_params("pair_margin")[:, term.pair_ids] == 0.0).all()


def test_schedule_lowers_the_level_only_when_the_success_window_passes():
    env = lift_env(num_envs=8)
    schedule = PrivilegeSchedule(env, success_threshold=0.75, window_episodes=8, step=0.25)
    ids = env.all_env_ids

    def finish(successes):  # the first len(successes) envs end their episodes
        env.extras["success"] = torch.zeros(env.num_envs, dtype=torch.bool)
        env.extras["success"][: len(successes)] = torch.tensor(successes)
        return schedule(env, ids[: len(successes)])

    finish([True] * 4 + [False] * 4)  # 50 %: below the threshold
    assert env.privilege_manager.level == 1.0
    finish([True] * 6 + [False] * 2)  # the window (last 8) is 75 %, full: step down
    assert env.privilege_manager.level == 0.75 and schedule.count == 0
    log = finish([True] * 4)  # a fresh window, only half full: no step even at 100 %
    assert env.privilege_manager.level == 0.75 and log["level"] == 0.75 and log["success_window"] == 1.0
    finish([True] * 4)
    assert env.privilege_manager.level == 0.5
    for _ in range(6):
        finish([True] * 8)
    assert env.privilege_manager.level == 0.0, "λ never goes below min_level (0)"


def test_schedule_rule_halves_a_step_that_cost_success_and_meets_its_deadline():
    """On synthetic window rates: a step down after which success falls by more than the tolerance halves
    the next step (never below min_step); a step that costs nothing keeps it; the deadline's ceiling
    takes λ to 0 whatever the success."""
    rule = dict(success_threshold=0.75, min_step=0.0625, drop_tolerance=0.1)
    state = ScheduleState(level=1.0, step=0.25)
    assert not schedule_rule(state, None, 1.0, **rule) and state.level == 1.0  # the window is filling
    assert schedule_rule(state, 0.9, 1.0, **rule) and state.level == 0.75 and state.earned_rate == 0.9
    assert not schedule_rule(state, 0.5, 1.0, **rule)  # success fell 0.4 after the step: the next step is halved
    assert state.step == 0.125 and state.level == 0.75 and state.earned_rate is None
    assert schedule_rule(state, 0.8, 1.0, **rule) and state.level == 0.625
    assert schedule_rule(state, 0.76, 1.0, **rule) and state.step == 0.125  # a 0.04 fall is within the tolerance
    assert state.level == 0.5
    for rate in (0.3, 0.8, 0.3, 0.8, 0.3):  # every step costs success: halved down to min_step, not below
        schedule_rule(state, rate, 1.0, **rule)
    assert state.step == 0.0625
    stuck = ScheduleState(level=0.5, step=0.25)
    levels = []
    for steps in range(0, 1001, 100):  # never succeeding, but the deadline falls from 1 to 0 over 1000 steps
        schedule_rule(stuck, 0.1, deadline_ceiling(1.0, steps, 1000), **rule)
        levels.append(stuck.level)
    assert levels[:5] == [0.5] * 5 and levels[6] == pytest.approx(0.4) and levels[-1] == 0.0
    assert all(a >= b for a, b in zip(levels, levels[1:])), "λ never rises"
    assert deadline_ceiling(1.0, 5000, None) == 1.0


def test_schedule_term_follows_its_deadline_in_control_steps_and_resumes_it(tmp_path):
    cfg = make_task_cfg("arm_lift")
    cfg.num_envs = 4
    cfg.curriculum["privilege"] = CurriculumTermCfg(func=PrivilegeSchedule,
                                                    params={"window_episodes": 4, "zero_by_step": 10})
    env = BatonEnv(cfg)
    schedule = env.curriculum_manager.terms["privilege"]
    env.extras["success"] = torch.zeros(4, dtype=torch.bool)
    for _ in range(4):
        env.step(hold_action(env))
    log = schedule(env, env.all_env_ids[:1])
    assert env.privilege_manager.level == pytest.approx(0.6) and log["ceiling"] == pytest.approx(0.6)
    state = RslRlVecEnv(env).training_state()
    fresh = BatonEnv(cfg)
    resumed = fresh.curriculum_manager.terms["privilege"]
    RslRlVecEnv(fresh).load_training_state(state, strict=True)
    assert fresh.common_step_counter == 4 and fresh.privilege_manager.level == pytest.approx(0.6)
    for _ in range(6):
        fresh.step(hold_action(fresh))
    fresh.extras["success"] = torch.zeros(4, dtype=torch.bool)
    resumed(fresh, fresh.all_env_ids[:1])
    assert fresh.privilege_manager.level == 0.0
    env.close()
    fresh.close()


def test_schedule_state_and_level_survive_a_checkpoint(tmp_path):
    cfg = make_task_cfg("arm_lift")
    cfg.num_envs = 4
    cfg.curriculum["privilege"] = CurriculumTermCfg(func=PrivilegeSchedule, params={"window_episodes": 4})
    env = BatonEnv(cfg)
    runner = BatonRunner(RslRlVecEnv(env), make_agent_cfg("arm_lift"), log_dir=None)
    schedule = env.curriculum_manager.terms["privilege"]
    env.extras["success"] = torch.ones(4, dtype=torch.bool)
    schedule(env, env.all_env_ids)
    schedule(env, env.all_env_ids[:2])
    assert env.privilege_manager.level == 0.75 and schedule.count == 2
    path = runner.save(tmp_path / "model_1.pt")

    fresh = BatonEnv(cfg)
    resumed = BatonRunner(RslRlVecEnv(fresh), make_agent_cfg("arm_lift"), log_dir=None)
    assert fresh.privilege_manager.level == 1.0
    resumed.load(path)
    assert fresh.privilege_manager.level == 0.75
    assert fresh.curriculum_manager.terms["privilege"].count == 2


def test_schedule_refuses_a_task_without_privileges():
    cfg = make_task_cfg("arm_reach")
    cfg.num_envs = 2
    cfg.curriculum["privilege"] = CurriculumTermCfg(func=PrivilegeSchedule)
    with pytest.raises(ValueError, match="no privileges"):
        BatonEnv(cfg)


def test_play_config_runs_without_privileges():
    cfg = make_task_cfg("arm_lift", play=True)
    assert cfg.privilege_level == 0.0 and not cfg.curriculum
    env = BatonEnv(cfg)
    assert not env.privilege_manager.terms["gripper_through_table"].relaxed.any()
    env.step(hold_action(env))
    assert torch.count_nonzero(env.sim.xfrc_applied) == 0


def test_level_is_logged_when_envs_reset():
    env = lift_env(num_envs=2, level=0.5)
    env.episode_length_buf[:] = env.max_episode_length - 1
    *_, extras = env.step(hold_action(env))
    assert extras["log"]["Privilege/level"] == 0.5


def test_head_start_moves_the_objects_start_toward_the_edge_by_the_level():
    starts = {}
    for level in (1.0, 0.5, 0.0):
        cfg = make_task_cfg("arm_push_grasp")
        cfg.num_envs, cfg.privilege_level, cfg.curriculum, cfg.seed = 64, level, {}, 3
        env = BatonEnv(cfg)
        starts[level] = body_pos(env, "object")[:, :2].clone()
        env.close()
    params = make_task_cfg("arm_push_grasp").privileges["head_start"].params
    shift, bound = params["shift"][1], params["max_xy"][1]
    y = {level: xy[:, 1] for level, xy in starts.items()}
    assert (-0.05 <= y[0.0]).all() and (y[0.0] <= 0.05).all(), "at λ = 0 the task's own start"
    torch.testing.assert_close(y[0.5], (y[0.0] + shift / 2).clamp(max=bound), atol=1e-3, rtol=0)  # the same draws
    torch.testing.assert_close(y[1.0], (y[0.0] + shift).clamp(max=bound), atol=1e-3, rtol=0)
    assert (y[0.5] < bound).any() and (y[1.0] <= bound + 1e-3).all()
    torch.testing.assert_close(starts[1.0][:, 0], starts[0.0][:, 0], atol=1e-6, rtol=0)  # x is not shifted

