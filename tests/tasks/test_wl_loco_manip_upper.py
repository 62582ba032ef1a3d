# SPDX-License-Identifier: BSD-3-Clause
"""`wl_loco_manip_upper`: the commands an expert issued are recorded as it issued them, played to the whole-body policy
step by step, refused clearly when unusable, and its policy is a lower level the wheel-legged tasks accept."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from batonlab.actions.command_layer import LowerLevelError
from batonlab.env.env import BatonEnv
from batonlab.env.terms import build_term
from batonlab.events.upper_commands import CommandRecording, CommandRecordingError
from batonlab.tasks import make_task_cfg
from conftest import make_env
from whole_body import command_recording, untrained_export, with_command_recording, with_lower_level

EPISODES, SECONDS = 4, 1.0


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    return command_recording(tmp_path_factory.mktemp("upper") / "commands.npz", EPISODES, SECONDS)


def _upper_env(file, fraction: float, num_envs: int = 4, seed: int = 0) -> BatonEnv:
    def edit(cfg):
        with_command_recording(cfg, file)
        cfg.events["upper_commands"].params["fraction"] = fraction
        cfg.sim.num_threads = 1
    return make_env("wl_loco_manip_upper", num_envs, seed=seed, edit=edit)


def test_the_commands_are_recorded_as_the_expert_held_them(recording):
    saved = CommandRecording.load(recording)
    steps = round(SECONDS / saved.step_dt)
    assert saved.sources == ("wl_baton",) * EPISODES and saved.lengths.tolist() == [steps] * EPISODES
    # The same episodes, run again: the command terms held what the recording says, at every step.
    cfg = make_task_cfg("wl_baton_scripted", play=True)
    cfg.num_envs, cfg.seed, cfg.episode_length_s = EPISODES, 0, SECONDS
    cfg.events.pop("action_delay")
    env = BatonEnv(cfg)
    expert = build_term(cfg.expert.func, cfg.expert.params, env, "expert")
    env.reset()
    for step in range(steps - 1):
        env.step(expert(env))
        held = env.command_manager.command("base_velocity")[:, :2].numpy()
        np.testing.assert_allclose(held, saved.velocity[:, step], atol=1e-6)
        np.testing.assert_allclose(env.command_manager.command("ee_target").numpy(), saved.pose[:, step], atol=1e-6)
    env.close()
    # The expert drives: it catches up with the baton ahead at a speed within its limits, the tool held out.
    assert 0.2 < saved.velocity[:, :, 0].mean() <= 0.9 and np.abs(saved.velocity[:, :, 1]).max() <= 0.8


def test_played_commands_are_held_step_by_step_and_the_next_recording_follows(recording):
    saved = CommandRecording.load(recording)
    env = _upper_env(recording, fraction=1.0)
    event = env.event_manager.terms["upper_commands"]
    env.reset()
    previous = np.full(env.num_envs, -1)
    ended_recordings = 0
    for _ in range(int(saved.lengths.max()) + 10):  # past the end of every recording
        _, _, terminated, truncated, _ = env.step(torch.zeros(env.num_envs, env.num_actions))
        episode, step = event.episode.numpy(), event.step.numpy() - 1
        assert event.playing.all()
        np.testing.assert_allclose(env.command_manager.command("base_velocity")[:, :2].numpy(),
                                   saved.velocity[episode, step], atol=1e-6)
        np.testing.assert_allclose(env.command_manager.command("ee_target").numpy(), saved.pose[episode, step],
                                   atol=1e-6)
        # Held: the command terms' own timers and glide leave them where they are.
        held = {name: term.command.clone() for name, term in env.command_manager.terms.items()}
        for term in env.command_manager.terms.values():
            term.update(0.0)
        for name, term in env.command_manager.terms.items():
            torch.testing.assert_close(term.command, held[name])
        # A recording plays on, step after step, until its episode ends (then another one starts) or the env resets.
        restarted = step == 0
        reset = (terminated | truncated).numpy()
        assert (step[~restarted] == previous[~restarted] + 1).all()
        ended_recordings += int((restarted & ~reset & (previous >= 0)).sum())
        assert (previous[restarted & ~reset & (previous >= 0)] == saved.lengths[0] - 1).all()
        previous = step
    assert ended_recordings > 0
    env.close()


def test_a_fraction_of_episodes_plays_recordings_and_the_rest_keep_their_draws(recording):
    env = _upper_env(recording, fraction=0.5, num_envs=64)
    event = env.event_manager.terms["upper_commands"]
    env.reset()
    env.step(torch.zeros(env.num_envs, env.num_actions))
    playing = event.playing
    assert 16 < int(playing.sum()) < 48
    base = env.command_manager.terms["base_velocity"]
    assert torch.isinf(base.time_left[playing]).all() and torch.isfinite(base.time_left[~playing]).all()
    env.close()
    assert not _upper_env(recording, fraction=0.0).event_manager.terms["upper_commands"].playing.any()


def test_an_unusable_recording_is_refused_clearly(recording, tmp_path):
    with pytest.raises(CommandRecordingError, match="env.events.upper_commands.params.file=FILE"):
        make_env("wl_loco_manip_upper", 2)
    with pytest.raises(CommandRecordingError, match="no command recording at"):
        _upper_env(tmp_path / "missing.npz", 0.5)
    corrupt = tmp_path / "corrupt.npz"
    corrupt.write_bytes(recording.read_bytes()[:200])
    with pytest.raises(CommandRecordingError, match="is not a command recording"):
        _upper_env(corrupt, 0.5)
    saved = CommandRecording.load(recording)
    velocity = saved.velocity.copy()
    velocity[1, 3, 0] = np.nan
    with pytest.raises(CommandRecordingError, match="non-finite"):
        CommandRecording(velocity, saved.pose, saved.lengths, saved.step_dt, saved.sources)
    slow = tmp_path / "slow.npz"
    CommandRecording(saved.velocity, saved.pose, saved.lengths, 0.05, saved.sources).save(slow)
    with pytest.raises(CommandRecordingError, match="control period of 0.05 s"):
        _upper_env(slow, 0.5)
    with pytest.raises(ValueError, match="fraction must be in"):
        _upper_env(recording, 1.5)


def test_its_policy_is_a_lower_level_of_the_wheel_legged_tasks(recording, tmp_path):
    export = untrained_export(tmp_path / "upper", task="wl_loco_manip_upper", recording=recording)
    cfg = with_lower_level(make_task_cfg("wl_baton", play=True), export)
    cfg.num_envs = 2
    env = BatonEnv(cfg)
    obs, *_ = env.step(torch.zeros(2, env.num_actions))
    assert torch.isfinite(obs["policy"]).all()
    env.close()
    other = untrained_export(tmp_path / "balance", task="wl_balance")
    with pytest.raises(LowerLevelError, match="'wl_loco_manip_pose' or 'wl_loco_manip_upper' policy"):
        BatonEnv(with_lower_level(make_task_cfg("wl_baton", play=True), other))
