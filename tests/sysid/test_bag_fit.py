# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab sysid` fits back what a changed simulator did: bags recorded as `play record=` records them, from arm_reach
with armature ×3, damping ×0.5, friction loss 0.3 N·m and one control period of command delay, give each parameter
within 10 %, the delay exactly, and a held-out replay error ≥ 5× lower; also with the training's sensor noise."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import yaml

from batonlab.cli import replay as replay_cli
from batonlab.cli import sysid as sysid_cli
from batonlab.cli.common import CliError, build_invocation
from batonlab.env.scene import scene_spec
from batonlab.logs.bag_reader import open_bag
from batonlab.logs.sim_recorder import EpisodeRecorder
from batonlab.robots.arm6 import ARM_JOINTS, make_arm6_spec
from batonlab.robots.fitted import FitOverlay, group_value, read_fit, write_fit
from batonlab.rl.evaluate import evaluate
from batonlab.sysid.fit import fit_segments, split_segments
from batonlab.sysid.parameters import coarse_parameters, joint_parameters, joint_values
from batonlab.sysid.sequences import bag_segments
from batonlab.tasks.replay import task_cfg_for
from conftest import make_env
from ros.exports import make_export

CONTROL_DT = 0.02
"""arm_reach's control period [s]; the changed simulator applies each command one period late."""

GROUPS = ["armature", "damping", "frictionloss"]

EPISODES = 8
"""Bags recorded; the noise-free fit reads the first four."""


def truth_overlay() -> FitOverlay:
    """The changed simulator: the 'real robot' the bags come from."""
    nominal = make_arm6_spec()
    return FitOverlay(values={j: {"armature": 3.0 * group_value(nominal, j, "armature"),
                                  "damping": 0.5 * group_value(nominal, j, "damping"), "frictionloss": 0.3}
                              for j in ARM_JOINTS}, command_delay_s=CONTROL_DT)


@pytest.fixture(scope="module")
def bags(tmp_path_factory):
    """Eight 2 s arm_reach episodes of the changed simulator, its arm driven by sums of sines (no randomisation)."""
    out = tmp_path_factory.mktemp("sysid_bags")
    truth = write_fit(out / "truth.yaml", truth_overlay())

    def changed(cfg) -> None:
        cfg.events.pop("joint_params")  # the real robot is one robot, not a draw
        cfg.scene.fit = str(truth)
        cfg.episode_length_s = 2.0

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    env = make_env("arm_reach", num_envs=EPISODES, seed=0, play=True, edit=changed)
    rng = np.random.default_rng(0)
    freq = rng.uniform(0.5, 3.0, (EPISODES, 3, 6))  # [Hz]: fast enough to show inertia, slow enough to stop and turn
    amp, phase = rng.uniform(0.2, 0.5, (EPISODES, 3, 6)), rng.uniform(0.0, 2 * np.pi, (EPISODES, 3, 6))
    steps = iter(range(10**6))

    def sines(obs):
        t = next(steps) * env.step_dt
        return torch.as_tensor((amp * np.sin(2 * np.pi * freq * t + phase)).sum(axis=1), dtype=torch.float32)

    recorder = EpisodeRecorder(env, out, EPISODES, "arm_reach", prefix="arm_reach")
    evaluate(env, sines, progress=False, step_callback=recorder)
    paths = recorder.close()
    env.close()
    torch.set_num_threads(threads)
    return paths


def assert_recovered(values: dict[str, dict[str, float]], delay_s: float) -> None:
    truth = truth_overlay()
    for joint in ARM_JOINTS:
        for group in GROUPS:
            assert values[joint][group] == pytest.approx(truth.values[joint][group], rel=0.10), (joint, group)
    assert delay_s == pytest.approx(CONTROL_DT, abs=1e-9)


def test_sysid_fits_the_changed_simulator_back_from_its_bags(bags, tmp_path, capsys):
    out = tmp_path / "fit"
    code = sysid_cli.run([*map(str, bags[:4]), "params=armature,damping,frictionloss,delay", f"out={out}",
                          "max_iters=6", "max_delay_s=0.04"])
    assert code == 0
    printed = capsys.readouterr().out
    fit = read_fit(out / "fit.yaml")
    assert_recovered(fit.values, fit.command_delay_s)
    before, after = (fit.source["rmse_rad"]["validation"][k] for k in ("before", "after"))
    assert before / after >= 5.0, (before, after)
    assert fit.source["held_out_segments"] == 1 and fit.source["fit_segments"] == 3
    assert "command delay: 20.0 ms (4 physics steps, 1.00 control periods" in printed
    overrides = (out / "randomization.txt").read_text().split()
    assert overrides[0] == f"env.scene.fit={out / 'fit.yaml'}"
    assert {o.split("=")[0] for o in overrides[1:]} == {f"env.events.joint_params.params.{k}_range"
                                                        for k in ("damping", "friction")}  # what arm_reach randomises
    assert build_invocation(["task=arm_reach", *overrides]).task.scene.fit == str(out / "fit.yaml")  # they paste
    assert (out / "report.html").stat().st_size > 10_000 and (out / "replay.png").stat().st_size > 10_000
    assert "Held-out replay, before and after" in (out / "report.html").read_text()  # the replay is in the report
    assert "data:image/png;base64," in (out / "report.html").read_text()
    assert "coarse (shared) fit: */armature 0.06" in printed  # per joint, coarse to fine
    assert "noisy joint velocities" not in printed and "not identified" not in printed

    # `batonlab replay --sysid` replays the held-out bag on the nominal and on the fitted model, side by side.
    assert replay_cli.run([str(bags[3]), "--mode", "open_loop", "--sysid", str(out / "fit.yaml")]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "-> fitted model" in x)
    assert float(line.split("(")[-1].split("x lower")[0]) >= 5.0, line

    # The fit is what a task then trains on: env.scene.fit= puts the fitted values and the delay in its model.
    env = make_env("arm_reach", num_envs=1, play=True,
                   edit=lambda cfg: setattr(cfg.scene, "fit", str(out / "fit.yaml")))
    model = env.scene.model
    elbow = model.joint("elbow_pitch")
    assert model.dof_armature[elbow.dofadr[0]] == pytest.approx(fit.values["elbow_pitch"]["armature"])
    assert model.actuator_delay[model.actuator("elbow_pitch").id] == pytest.approx(CONTROL_DT)
    env.close()


@pytest.mark.parametrize("args, message", [
    (["params=armature"], "no bag given"),
    (["BAG", "params=delay"], "params= names the groups to fit"),
    (["BAG", "params=damping", "joint=elbow"], "unknown option joint=; options: task=, robot="),
    (["BAG", "params=damping", "holdout_every=1"], "holdout_every=1: expected a whole number >= 2"),
    (["BAG", "params=damping", "task=arm_reach", "export=EXPORT"], "task= and export=: name the model once"),
    (["BAG", "params=damping", "noisy_velocities=maybe"], "noisy_velocities=maybe: expected auto, true or false"),
])
def test_bad_arguments_are_one_line_naming_them(args, message):
    with pytest.raises(CliError, match=message):
        sysid_cli.run(args)


def test_a_bag_of_an_unknown_group_or_a_single_stretch_is_refused(bags, tmp_path):
    with pytest.raises(CliError, match=r"unknown parameter groups \['inertia'\]"):
        sysid_cli.run([str(bags[0]), str(bags[1]), "params=inertia", f"out={tmp_path}"])
    with pytest.raises(CliError, match="a fit needs at least two segments"):
        sysid_cli.run([str(bags[0]), "params=damping", f"out={tmp_path}"])


def test_the_model_comes_from_a_run_or_an_export_as_well(bags, tmp_path, capsys):
    """`run_dir=` reads the task its run was trained on (config.yaml), `export=` the task its manifest names."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text("task_name: arm_reach\n")
    export_dir = make_export(tmp_path / "export")
    for source in (f"run_dir={run_dir}", f"export={export_dir}"):
        assert sysid_cli.run([str(bags[0]), str(bags[1]), "params=damping", "max_iters=1", "report=false",
                              f"out={tmp_path / 'fit'}", source]) == 0
        assert "sysid of task arm_reach: 6 parameters" in capsys.readouterr().out
    with pytest.raises(CliError, match="export=.*manifest"):
        sysid_cli.run([str(bags[0]), str(bags[1]), "params=damping", f"export={tmp_path}"])


def test_a_parameter_the_bags_do_not_move_is_named_as_not_identified(bags, tmp_path, capsys):
    """The arm's servos never reach their torque limit in these bags: its fit's interval is wider than its value."""
    assert sysid_cli.run([str(bags[0]), str(bags[1]), "params=torque_limit", "joints=wrist_roll", "max_iters=2",
                          "report=false", f"out={tmp_path / 'fit'}"]) == 0
    printed = capsys.readouterr().out
    assert "not identified by these bags (95 % interval wider than the value): wrist_roll torque_limit" in printed


def test_with_the_trainings_sensor_noise_each_joint_is_fitted_back(bags):
    """Joint states noised as arm_reach's policy observation noises them (0.01 rad, 0.05 rad/s), 12 s of them fitted:
    a single joint's friction loss moves it by about a milliradian against its servo, under 10 mrad of noise. Coarse
    to fine, the shared groups pool all six joints' data, and each joint's values then come back within 10 %.
    More data and joints that differ from each other: bench/sysid_known_answer.py."""
    logs = [open_bag(path) for path in bags]
    _, cfg = task_cfg_for(logs[0])
    terms = cfg.observations["policy"].terms
    rng = np.random.default_rng(1)
    for log in logs:
        log.joint_states.position += rng.normal(0.0, terms["joint_pos"].noise_std, log.joint_states.position.shape)
        log.joint_states.velocity += rng.normal(0.0, terms["joint_vel"].noise_std, log.joint_states.velocity.shape)
    spec, _ = scene_spec(cfg.scene, cfg.sim)
    nominal, _ = scene_spec(cfg.scene, cfg.sim)
    segments = [s for log in logs for s in bag_segments(log, spec, None, max_delay_s=0.04)]
    assert not any(s.noisy_velocities for s in segments)  # 0.05 rad/s: the logged velocities still start a stretch
    joints = list(ARM_JOINTS)
    result = fit_segments(joint_parameters(spec, joints, GROUPS), *split_segments(segments), max_iters=6,
                          coarse=coarse_parameters(spec, joints, GROUPS))
    print(yaml.safe_dump({"noisy per-joint fit": {n: float(p.value[0]) for n, p in result.fitted.items()},
                          "coarse": {n: float(p.value[0]) for n, p in result.coarse.items()},
                          "half_width_95": result.half_width_95, "rmse_rad": result.rmse_rad}))
    assert_recovered(joint_values(result.fitted, nominal, joints), result.command_delay_s)
    before, after = result.rmse_rad["validation"]
    assert before / after >= 5.0, (before, after)  # against noisy joint states: `after` is at the noise's 0.01 rad
