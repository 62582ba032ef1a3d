# SPDX-License-Identifier: BSD-3-Clause
"""The wheel-legged robot's legs are fitted back from `play record=` bags of a changed simulator: armature ×3, damping
×0.5, friction loss 0.3 N·m, one control period of command delay; the trained balancing policy drives it. The base
floats: the fit replays half-second windows, each from the logged joints and odometry. Under wl_balance's sensor
noise (1 rad/s on the leg velocities), the windows start from a local fit of the logged positions instead."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from batonlab.env.scene import scene_spec
from batonlab.logs.bag_reader import open_bag
from batonlab.logs.sim_recorder import EpisodeRecorder
from batonlab.rl.evaluate import evaluate
from batonlab.robots.fitted import FitOverlay, group_value, write_fit
from batonlab.sysid.fit import fit_segments, replayed_positions, split_segments
from batonlab.sysid.parameters import coarse_parameters, joint_parameters, joint_values
from batonlab.sysid.sequences import bag_segments
from batonlab.tasks import make_task_cfg
from batonlab.tasks.replay import task_cfg_for
from conftest import make_env

LEGS = ["left_hip_pitch", "left_knee_pitch", "right_hip_pitch", "right_knee_pitch"]
WHEELS = ["left_wheel", "right_wheel"]
GROUPS = ["armature", "damping", "frictionloss"]
RANDOMIZATION = ("wheel_friction", "base_mass", "actuator_gains", "action_delay", "push")
"""wl_balance's randomisation: the changed simulator is one robot, not a draw."""


@pytest.fixture(scope="module")
def changed_legs(wl_balance_policy, tmp_path_factory):
    """(truth overlay, four 2 s bags of the changed simulator balanced by the trained policy)."""
    tmp_path = tmp_path_factory.mktemp("legs")
    cfg = make_task_cfg("wl_balance", play=True)
    nominal, _ = scene_spec(cfg.scene, cfg.sim)
    truth = FitOverlay(values={j: {"armature": 3.0 * group_value(nominal, j, "armature"),
                                   "damping": 0.5 * group_value(nominal, j, "damping"), "frictionloss": 0.3}
                               for j in LEGS}, command_delay_s=0.02, delayed_joints=LEGS + WHEELS)
    truth_path = write_fit(tmp_path / "truth.yaml", truth)

    def changed(cfg) -> None:
        for name in RANDOMIZATION:
            del cfg.events[name]
        cfg.scene.fit = str(truth_path)
        cfg.episode_length_s = 2.0

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    env = make_env("wl_balance", num_envs=4, seed=0, play=True, edit=changed)
    recorder = EpisodeRecorder(env, tmp_path / "bags", 4, "wl_balance", prefix="wl_balance")
    evaluate(env, wl_balance_policy.policy, progress=False, step_callback=recorder)
    paths = recorder.close()
    env.close()
    torch.set_num_threads(threads)
    return truth, paths


def test_the_legs_are_fitted_back_from_bags_of_the_balancing_robot(changed_legs):
    """Per leg, coarse to fine: each leg's joint damping (0.1 N·m·s/rad) is 4 % of its servo's (2.5), too little for
    seconds of one joint's motion to pin it from the nominal values; from the shared groups' fit of all four legs,
    every leg's values come back within 10 %."""
    truth, paths = changed_legs
    logs = [open_bag(path) for path in paths]
    assert logs[0].odom is not None and set(LEGS + WHEELS) <= set(logs[0].joint_states.names)
    _, cfg = task_cfg_for(logs[0])
    spec, _ = scene_spec(cfg.scene, cfg.sim)
    nominal, _ = scene_spec(cfg.scene, cfg.sim)
    segments = [s for log in logs for s in bag_segments(log, spec, LEGS, max_delay_s=0.03)]
    assert not any(s.noisy_velocities for s in segments)
    result = fit_segments(joint_parameters(spec, LEGS, GROUPS), *split_segments(segments), max_iters=6,
                          coarse=coarse_parameters(spec, LEGS, GROUPS))
    fitted = joint_values(result.fitted, nominal, LEGS)
    print({n: float(p.value[0]) for n, p in result.fitted.items()}, result.rmse_rad, len(segments), "windows")
    coarse = joint_values(result.coarse, nominal, LEGS)
    assert coarse["left_knee_pitch"]["damping"] == pytest.approx(truth.values["left_knee_pitch"]["damping"], rel=0.1)
    for joint in LEGS:
        for group in GROUPS:
            assert fitted[joint][group] == pytest.approx(truth.values[joint][group], rel=0.10), (joint, group)
    assert result.command_delay_s == pytest.approx(0.02, abs=1e-9)
    before, after = result.rmse_rad["validation"]
    assert before / after >= 5.0, (before, after)


def test_noisy_leg_velocities_start_the_windows_from_the_logged_positions(changed_legs):
    """With wl_balance's sensor noise on the logged joints, the bags are found noisy; at the true parameters the
    windows then replay to the position noise (0.01 rad), where starting them from the logged velocities leaves
    them 20 % or more above it. The fit itself, on more bags, is `bench/sysid_known_answer.py --noise noisy`."""
    truth, paths = changed_legs
    logs = [open_bag(path) for path in paths]
    _, cfg = task_cfg_for(logs[0])
    terms = cfg.observations["policy"].terms
    position_std, velocity_std = terms["leg_pos"].noise_std, terms["leg_vel"].noise_std
    assert (position_std, velocity_std) == (0.01, 1.0)
    rng = np.random.default_rng(0)
    for log in logs:
        log.joint_states.position += rng.normal(0.0, position_std, log.joint_states.position.shape)
        log.joint_states.velocity += rng.normal(0.0, velocity_std, log.joint_states.velocity.shape)
    spec, _ = scene_spec(cfg.scene, cfg.sim)
    params = joint_parameters(spec, LEGS, GROUPS)
    for joint in LEGS:
        for group in GROUPS:
            params[f"{joint}/{group}"].value[:] = truth.values[joint][group]

    def replay_rmse(noisy_velocities):
        segments = [s for log in logs for s in bag_segments(log, spec, LEGS, max_delay_s=0.03,
                                                            noisy_velocities=noisy_velocities)]
        replays = replayed_positions(segments, params, params.as_vector(), delay_s=truth.command_delay_s)
        errors = np.concatenate([(simulated - logged).ravel() for _, logged, simulated in replays])
        return float(np.sqrt(np.mean(errors ** 2))), segments

    smoothed, segments = replay_rmse(None)
    assert all(s.noisy_velocities for s in segments)
    logged, _ = replay_rmse(False)
    print("replay RMSE at the truth: smoothed start", smoothed, "logged start", logged)
    assert smoothed < 1.1 * position_std
    assert logged > 1.2 * position_std
