# SPDX-License-Identifier: BSD-3-Clause
"""BatonEnv and its managers on the arm_reach task and on hand-made configs."""

from __future__ import annotations

import pytest
import torch

from batonlab.observations.proprioception import last_action
from batonlab.env.cfg import EventTermCfg, ObsTermCfg, RewardTermCfg, TermCfg, TerminationTermCfg
from batonlab.env.env import BatonEnv
from batonlab.env.terms import ManagerTerm
from batonlab.rewards import regularizers
from batonlab.tasks import make_task_cfg
from conftest import make_reach_env


def test_observation_layout_and_step_contract(reach_env):
    env = reach_env
    obs = env.get_observations()
    assert obs["policy"].shape == (8, env.observation_manager.group_dim("policy")) == (8, 24)
    names = [t.name for t in env.observation_manager.layout["policy"]]
    assert names == ["joint_pos", "joint_vel", "ee_pos", "ee_target", "last_action"]
    obs, reward, terminated, truncated, extras = env.step(torch.zeros(8, env.num_actions))
    assert reward.shape == terminated.shape == truncated.shape == (8,)
    assert terminated.dtype == truncated.dtype == torch.bool
    assert extras["costs"].shape == (8, 0)
    assert torch.isfinite(obs["policy"]).all()


def test_time_out_is_a_truncation_with_per_term_logs(reach_env):
    env = reach_env
    for step in range(env.max_episode_length):
        _, _, terminated, truncated, extras = env.step(torch.zeros(8, env.num_actions))
    assert truncated.all() and not terminated.any()
    log = extras["log"]
    for term in env.reward_manager.terms:
        assert f"Episode_Reward/{term}" in log
    assert log["Episode_Termination/time_out"] == 1.0
    assert 0.0 <= log["Episode/success_rate"] <= 1.0
    assert (env.episode_length_buf == 0).all()


def test_zero_action_holds_default_pose(reach_env):
    env = reach_env
    for _ in range(40):
        env.step(torch.zeros(8, env.num_actions))
    arm = env.action_manager.terms["arm"]
    # PD with gravity sags a little; the commanded target is exactly the default pose.
    assert torch.allclose(env.sim.ctrl[:, arm.actuator_ids], arm.offset.expand(8, -1))
    error = (env.sim.qpos[:, arm.qpos_adr] - arm.offset).abs().max()
    assert error < 0.15


def test_commands_resample_on_timer_and_move_marker(reach_env):
    env = reach_env
    term = env.command_manager.terms["ee_target"]
    first = term.command.clone()
    steps_to_resample = round(2.0 / env.step_dt)
    for _ in range(steps_to_resample - 1):
        env.step(torch.zeros(8, env.num_actions))
    assert torch.equal(term.command, first)
    env.step(torch.zeros(8, env.num_actions))
    assert not torch.equal(term.command, first)
    assert (term.command >= term.low).all() and (term.command <= term.high).all()
    assert torch.allclose(env.sim.mocap_pos[:, term.mocap_id], term.command)


def test_command_timer_restarts_with_each_episode(reach_env):
    """Every episode sees its targets for the full 2 s, the later episodes as much as the first."""
    env = reach_env
    term = env.command_manager.terms["ee_target"]
    zero = torch.zeros(8, env.num_actions)
    changes = []
    for step in range(3 * env.max_episode_length):
        before = term.command.clone()
        env.step(zero)
        if not torch.equal(term.command, before):
            changes.append(step + 1)
    per_episode = round(2.0 / env.step_dt)
    assert changes == [k * per_episode for k in range(1, 3 * env.max_episode_length // per_episode + 1)]


def test_seeded_envs_are_reproducible():
    runs = []
    for _ in range(2):
        env = make_reach_env(num_envs=4, seed=7)
        generator = torch.Generator().manual_seed(0)
        for _ in range(30):
            obs, *_ = env.step(torch.randn(4, env.num_actions, generator=generator))
        runs.append(obs["policy"].clone())
        env.close()
    assert torch.equal(runs[0], runs[1])


def test_startup_randomisation_gives_each_world_its_own_damping(reach_env):
    damping = reach_env.sim.get_params("dof_damping")
    arm_dofs = reach_env.scene.dof_adr(reach_env.action_manager.terms["arm"].joint_names)
    assert damping[:, arm_dofs].std(dim=0).min() > 0.0
    assert ((damping[:, arm_dofs] >= 0.25 - 1e-6) & (damping[:, arm_dofs] <= 1.0 + 1e-6)).all()


def test_history_stacks_frames_oldest_first():
    cfg = make_task_cfg("arm_reach")
    cfg.num_envs = 2
    cfg.observations["policy"].terms["last_action"] = ObsTermCfg(func=last_action, history_length=3)
    env = BatonEnv(cfg)
    for value in (1.0, 2.0, 3.0):
        obs, *_ = env.step(torch.full((2, 6), value))
    history = obs["policy"][:, -18:].reshape(2, 3, 6)
    assert history[:, :, 0].tolist() == [[1.0, 2.0, 3.0]] * 2
    env.close()


def test_failure_termination_and_interval_events():
    cfg = make_task_cfg("arm_reach")
    cfg.num_envs = 4
    cfg.terminations["elbow_high"] = TerminationTermCfg(func=lambda env: env.sim.qpos[:, 2] > 10.0)
    fired = []
    cfg.events["count"] = EventTermCfg(func=lambda env, env_ids: fired.append(len(env_ids)), mode="interval", interval_range_s=(0.1, 0.1))
    env = BatonEnv(cfg)
    for _ in range(12):
        env.step(torch.zeros(4, 6))
    assert sum(fired) >= 8  # every env fires about every 5 steps
    env.sim._state[1, 3] = 20.0  # force env 1's elbow angle past the threshold
    env.sim._refresh_state_tensors()
    _, _, terminated, truncated, extras = env.step(torch.zeros(4, 6))
    assert terminated.tolist() == [False, True, False, False] and not truncated.any()
    assert extras["log"]["Episode_Termination/elbow_high"] == 1.0
    env.close()


def test_bad_config_fails_before_simulation():
    cfg = make_task_cfg("arm_reach")
    cfg.rewards["typo"] = RewardTermCfg(func=regularizers.joint_vel_l2, params={"jionts": ("elbow_pitch",)}, weight=-1.0)
    with pytest.raises(TypeError, match=r"rewards\['typo'\].*accepts \['joints'\]"):
        BatonEnv(cfg)
    cfg = make_task_cfg("arm_reach")
    cfg.actions["arm"].joints = ("shoulder_yaw", "elbow")
    with pytest.raises(KeyError, match="unknown joints \\['elbow'\\]"):
        BatonEnv(cfg)
    cfg = make_task_cfg("arm_reach")
    cfg.num_envs = 0
    with pytest.raises(ValueError, match="num_envs"):
        BatonEnv(cfg)
    with pytest.raises(KeyError, match="valid tasks"):
        make_task_cfg("arm_rech")


def test_wrong_action_size_is_rejected(reach_env):
    with pytest.raises(ValueError, match="expected actions of size 6"):
        reach_env.step(torch.zeros(8, 5))


def test_physics_blowup_resets_only_that_env(reach_env):
    env = reach_env
    env.step(torch.zeros(8, 6))
    env.sim._state[5, env.sim._offsets["qvel"][0]] = float("nan")
    _, reward, terminated, _, extras = env.step(torch.zeros(8, 6))
    assert terminated.tolist() == [i == 5 for i in range(8)]
    assert torch.isfinite(reward).all()
    assert env.sim.num_diverged_total == 1
    assert extras["log"]["Episode_Termination/physics_diverged"] == 1.0
    assert env.episode_length_buf[5] == 0 and env.episode_length_buf[0] == 2


class _EverTouched(ManagerTerm):
    """A success judged over the episode: true from the first step on (its state is reset with the episode)."""

    def __init__(self, env):
        self.seen = torch.zeros(env.num_envs, dtype=torch.bool)
        self.resets = 0

    def __call__(self, env) -> torch.Tensor:
        self.seen |= env.episode_length_buf >= 1
        return self.seen

    def reset(self, env_ids: torch.Tensor) -> None:
        self.resets += 1
        self.seen[env_ids] = False


def test_a_success_term_with_episode_state_is_reported_then_reset():
    """`extras["success"]` of the ending step keeps the term's verdict although the reset clears its state."""
    cfg = make_task_cfg("arm_reach", play=True)
    cfg.num_envs, cfg.sim.num_threads, cfg.episode_length_s = 2, 1, 0.2
    cfg.success = TermCfg(func=_EverTouched)
    env = BatonEnv(cfg)
    ended = False
    for _ in range(env.max_episode_length):
        *_, truncated, extras = env.step(torch.zeros(2, env.num_actions))
        ended = bool(truncated.all())
    assert ended and extras["success"].all()  # reported at the ending step
    assert not env.success_term.seen.any() and env.success_term.resets >= 1  # and reset for the next episode
    env.close()
