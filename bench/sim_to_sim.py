# SPDX-License-Identifier: BSD-3-Clause
"""Sim-to-sim over ROS 2 against `play`, seed for seed: the table of issue 11.

    python bench/sim_to_sim.py RUN_DIR [--checkpoint PATH] [--seed 1000] [--episodes 16] [--domain-id 61] [--real-time]

1. `play`: the run's newest checkpoint, or `--checkpoint` (the one its export was made from, e.g. a
   `keep_best` run's `model_best.pt`), as `batonlab play` runs it, in the task's play
   configuration, one episode per seed from the initial state of that seed (`seed_episode`), each
   action applied in its own step as the sim robot in lockstep applies it; a second `play` keeps the
   task's randomised action delay (the training's, which `batonlab play` keeps), for reference.
2. ROS 2: the run's export in `policy_node`, `sim_robot_node` as the robot, over Fast DDS on
   127.0.0.1 (`batonlab deploy --sim`'s `run_sim_to_sim`), episode i from seed `--seed` + i; in
   lockstep (each control period waits for its command), or with `--real-time` on the wall clock as a
   robot, with the commands' mean delay into their period [physics steps].

Both sides draw the same commands from the same seeds. A velocity command reaches `policy_node` as a
`cmd_vel` Twist, which carries no height: both sides then hold the height at the command's default
(the nominal height), so they see the same commands. Printed per side: survival (episodes that
reached the time limit), success (the task's own success term), for velocity tasks the mean
|v − v_cmd| over the episodes [m/s], for arm targets the mean end-effector errors (position [m],
orientation [rad]); then the per-episode lengths and speed errors.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from batonlab.cli.common import build_invocation  # noqa: E402
from batonlab.cli.deploy import describe_command_delays, resolve_export, run_sim_to_sim  # noqa: E402
from batonlab.deploy import load_manifest  # noqa: E402
from batonlab.deploy.levels import command_layer_of  # noqa: E402
from batonlab.cli.policy_loading import load_trained  # noqa: E402
from ros.training import LOCKSTEP_ACTION_DELAY, Episodes, play_on_seeds  # noqa: E402


def load_policy(run_dir: Path, task: str, checkpoint: Path | None = None, lower: Path | None = None):
    """The torch inference policy of the run's newest checkpoint (or `checkpoint`), as `batonlab play` loads it (a
    hierarchy's upper level over the whole-body export `lower`)."""
    chosen = [] if checkpoint is None else [f"checkpoint={checkpoint}"]
    over = [] if lower is None else [f"env.actions.commands.params.export={lower}"]
    inv = build_invocation([f"task={task}", f"run_dir={run_dir}", *chosen, *over], play=True)
    inv.task.num_envs = 1
    env, runner, _, checkpoint = load_trained(inv)  # a distillation run gives its student
    env.close()
    return runner.inference_policy(), checkpoint


def fixed_fields(manifest) -> dict[str, dict[str, float]]:
    """Command fields a Twist cannot carry, held at their default (what `sim_robot_node` does with cmd_vel)."""
    from deploy_ros.messages import TWIST_FIELDS

    out = {}
    for name, command in manifest.commands.items():
        if "lin_vel_x" in command.fields and command.default is not None:
            out[name] = {f: v for f, v in zip(command.fields, command.default) if f not in TWIST_FIELDS}
    return out


def summarize(label: str, episodes: Episodes) -> str:
    survival = 1.0 - episodes.terminated.mean()
    text = f"{label:<10} survival {survival:6.3f}   success {episodes.successes.mean():6.3f}"
    if episodes.speed_errors is not None:
        text += f"   mean |v - v_cmd| {np.mean(episodes.speed_errors):6.3f} m/s"
    for key, values in sorted((episodes.mean_errors or {}).items()):
        if "ee_" in key:  # the arm's tracking errors (`ee_target/ee_error` [m], `ee_target/ee_orient_error` [rad])
            text += f"   {key.split('/')[-1]} {np.mean(values):6.3f}"
    return text


def compare_on_seeds(run_dir: Path, task: str | None, seed: int, episodes: int, domain_id: int,
                     real_time: bool = False, log=print, checkpoint: Path | None = None
                     ) -> tuple[Episodes, Episodes, Episodes, dict]:
    """`play` and ROS 2 sim-to-sim of a run's newest checkpoint (or `checkpoint`, exported for ROS 2 too) on seeds
    `seed`..`seed + episodes - 1`: (play episodes without action delay, as in lockstep; play episodes with the task's
    randomised delay; ROS 2 episodes; sim_robot_node's summary)."""
    exported = checkpoint is not None and not (run_dir / "manifest.json").is_file()
    export_dir = resolve_export((checkpoint if exported else run_dir).resolve(), task)  # the checkpoint played
    manifest = load_manifest(export_dir)
    task = task or manifest.task
    seeds = range(seed, seed + episodes)
    fixed = fixed_fields(manifest)
    # A hierarchy plays over the whole-body export its own export carries (`lower/`), as the robot runs it.
    lower = None if manifest.levels is None else export_dir / command_layer_of(manifest.levels[0]).lower
    policy, checkpoint = load_policy(run_dir.resolve(), task, checkpoint, lower)
    log(f"{task}: {checkpoint}; seeds {seeds.start}..{seeds.stop - 1}; fixed command fields {fixed}")

    start = time.perf_counter()
    lower = None if lower is None else str(lower)
    play = play_on_seeds(task, policy, seeds, fixed, lower=lower, action_delay=LOCKSTEP_ACTION_DELAY)
    delayed = play_on_seeds(task, policy, seeds, fixed, lower=lower)
    log(f"play: {time.perf_counter() - start:.0f} s")

    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as logs:
        summary = run_sim_to_sim(export_dir, task, seed, episodes, domain_id, log_dir=Path(logs),
                                 timeout_s=120.0 + 3.0 * episodes * 30.0, lockstep=not real_time)
    done = summary["episodes"]
    errors = [e.get("mean_speed_error") for e in done]
    ros = Episodes(np.array([e["success"] for e in done]), np.array([e["length"] for e in done]),
                   np.array([e["terminated"] for e in done]),
                   np.array(errors, dtype=float) if errors and errors[0] is not None else None,
                   {key: np.array([e["mean_errors"][key] for e in done]) for key in (done[0]["mean_errors"] if done else {})})
    if lower is not None:  # the sim robot's command terms are its own draws: the upper level's commands never reach it
        ros = dataclasses.replace(ros, speed_errors=None, mean_errors=None)
    log(f"ROS 2 sim-to-sim ({'real time' if real_time else 'lockstep'}): {time.perf_counter() - start:.0f} s; "
        f"{describe_command_delays(summary)}")
    return play, delayed, ros, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="training run folder (logs/<task>/<time>)")
    parser.add_argument("--task", default=None)
    parser.add_argument("--checkpoint", type=Path, default=None, help="play this checkpoint (default: the newest)")
    parser.add_argument("--seed", type=int, default=1000)
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--domain-id", type=int, default=61)
    parser.add_argument("--real-time", action="store_true", help="the sim robot on the wall clock (default: lockstep)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    play, delayed, ros, _ = compare_on_seeds(args.run_dir, args.task, args.seed, args.episodes, args.domain_id,
                                             args.real_time, log=lambda line: print(line, flush=True),
                                             checkpoint=args.checkpoint)
    print(summarize("play", play))
    print(summarize("ROS 2", ros))
    print(summarize("play, the task's action delay", delayed))
    print(f"lengths play  {play.lengths.tolist()}")
    print(f"lengths ROS 2 {ros.lengths.tolist()}")
    print(f"success play  {play.successes.astype(int).tolist()}")
    print(f"success ROS 2 {ros.successes.astype(int).tolist()}")
    print(f"success difference: {abs(play.successes.mean() - ros.successes.mean()) * 100:.1f} points")
    if play.speed_errors is not None and ros.speed_errors is not None:
        print(f"|v - v_cmd| play  {np.round(play.speed_errors, 3).tolist()}")
        print(f"|v - v_cmd| ROS 2 {np.round(ros.speed_errors, 3).tolist()}")
        print(f"difference of the means: {abs(np.mean(ros.speed_errors) - np.mean(play.speed_errors)):.3f} m/s")
    print(f"survival difference: {abs(play.terminated.mean() - ros.terminated.mean()) * 100:.1f} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
