# SPDX-License-Identifier: BSD-3-Clause
"""Training to a result: `stop_at=success:RATE` stops at the first periodic play evaluation that reaches it,
`keep_best=true` keeps the checkpoint of the best one (across a resume), a ceiling bounds it, tasks over a user's robot train to their success bar by default, and a run that ends
below its task's bar says so and prints the command that continues it."""

from __future__ import annotations

import re
import shlex
import shutil

from batonlab.cli.common import build_invocation
from batonlab.cli.main import main
from batonlab.cli.training_target import training_plan
from batonlab.rl import checkpoint
from robot_files import write_urdf_arm

# Malformed stop_at / eval_interval: tests/cli/test_bad_input_train.py.


def test_tasks_over_a_user_robot_train_to_their_bar_by_default(tmp_path):
    """reach over robot= trains until play success 0.9 within 300 iterations; without robot= (arm6), or with
    max_iterations= / stop_at= given, the user's choice holds; a fixed-robot task keeps its fixed budget."""
    robot = write_urdf_arm(tmp_path, gripper=True)
    over_robot = training_plan(build_invocation(["task=reach", f"robot={robot}"]))
    assert over_robot.stop_at.rate == 0.9 and over_robot.stop_at.by_default and over_robot.total_iterations == 300
    ceiling = training_plan(build_invocation(["task=reach", f"robot={robot}", "max_iterations=120"]))
    assert ceiling.stop_at.rate == 0.9 and ceiling.total_iterations == 120
    arm6 = training_plan(build_invocation(["task=reach"]))
    assert arm6.stop_at is None and arm6.total_iterations == 30
    asked = training_plan(build_invocation(["task=arm_reach", "stop_at=success:0.8", "eval_interval=5"]))
    assert (asked.stop_at.rate, asked.stop_at.interval, asked.stop_at.by_default) == (0.8, 5, False)
    assert asked.total_iterations == 300  # arm_reach's bar gives the ceiling


def test_a_run_that_reaches_its_target_stops_there_and_keeps_its_best(arm_reach_policy, tmp_path, capsys):
    """Resuming the session's trained arm_reach (≥ 0.9) with stop_at=success:0.5 stops at the first evaluation,
    saves that iteration, says why, and reports that evaluation as the run's success; with keep_best=true it
    saves model_best.pt there, and resuming again keeps the best of all evaluations (the earlier one's
    too) in model_best.pt, which resume never takes for the newest checkpoint and play loads."""
    run = tmp_path / "run"
    shutil.copytree(arm_reach_policy.run_dir, run)
    start = max(int(p.stem.split("_")[1]) for p in run.glob("model_[0-9]*.pt"))
    common = ["resume=true", f"run_dir={run}", "eval_interval=1", "env.num_envs=64", "eval_episodes=64",
              "progress=false", "keep_best=true"]
    code = main(["train", *common, f"max_iterations={start + 10}", "stop_at=success:0.5"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"iteration {start + 1}: play success" in out and "best so far: saved model_best.pt" in out
    assert f"done: {start + 1} iterations" in out and "stopped: play success" in out and "stop_at=success:0.5" in out
    assert (run / f"model_{start + 1}.pt").is_file() and not (run / f"model_{start + 2}.pt").exists()
    reported = re.search(r"arm_reach: success rate (\d\.\d\d) over 64 episodes", out)
    assert reported and float(reported[1]) >= 0.5, out
    first = checkpoint.load(run / "model_best.pt")
    assert first["iter"] == start + 1 and f"{first['play_evaluation']['success_rate']:.2f}" == reported[1]

    assert main(["train", *common, f"max_iterations={start + 3}"]) == 0
    out = capsys.readouterr().out
    rates = {start + 1: first["play_evaluation"]["success_rate"]}
    found = re.search(rf"iteration {start + 2}: play success (\d\.\d\d) \((best so far|best \d\.\d\d at)", out)
    closing = re.search(r"arm_reach: success rate (\d\.\d\d) over 64 episodes", out)  # the last iteration's
    assert found and closing, out
    rates[start + 2], rates[start + 3] = float(found[1]), float(closing[1])
    best_iteration = max(rates, key=lambda it: (rates[it], -it))  # ties keep the earlier
    best = checkpoint.load(run / "model_best.pt")
    assert best["iter"] == best_iteration, (rates, out)
    assert f"best play success {rates[best_iteration]:.2f} at iteration {best_iteration}" in out
    assert checkpoint.latest_checkpoint(run) == run / f"model_{start + 3}.pt"
    assert main(["play", f"run_dir={run}", f"checkpoint={run / 'model_best.pt'}", "play.num_episodes=4",
                 "progress=false", "play.video=false"]) == 0, capsys.readouterr()


def test_a_run_below_its_bar_says_how_to_continue_and_the_resumed_run_reports_success(tmp_path, capsys):
    """Two iterations of reach over the gripper arm end at the ceiling below the bar: the run says it stopped at
    the ceiling, that 0.00 is below 0.90, and prints the command that continues it, which works and reports
    its success rate again; the robot's gravity sag is reported on stderr."""
    robot = write_urdf_arm(tmp_path / "robot", gripper=True)
    common = ["env.num_envs=16", "eval_interval=1", "eval_episodes=8", "progress=false"]
    code = main(["train", "task=reach", f"robot={robot}", "max_iterations=2", f"log_root={tmp_path / 'logs'}", *common])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = captured.out
    assert "training until play success >= 0.90 (the task's success bar over robot=)" in out
    assert "iteration 1: play success 0.00 (stopping at 0.90)" in out
    assert "stopped at the ceiling of 2 iterations before play success reached 0.90" in out
    assert "under gravity its servos hold the default pose with the end effector" in captured.err
    advice = re.search(r"play success 0\.00 is below the task's bar 0\.90 after 2 iterations; train on with: "
                       r"batonlab train (.*)$", out, re.MULTILINE)
    assert advice, out
    again = shlex.split(advice[1])
    assert "resume=true" in again and "max_iterations=4" in again and f"robot={robot}" in again
    assert main(["train", *again, "eval_interval=1", "eval_episodes=8", "progress=false"]) == 0
    resumed = capsys.readouterr().out
    assert "done: 4 iterations" in resumed
    assert re.fullmatch(r"\[batonlab\] reach: success rate \d\.\d\d over 8 episodes .*", resumed.splitlines()[-1]), resumed
