# SPDX-License-Identifier: BSD-3-Clause
"""Train `wl_velocity` on the CPU, then measure how well it tracks 1 m/s on flat ground.

    python scripts/train_wl_velocity.py [--iterations 300] [--num-envs 1024] [--seed 0] [env.…=… agent.…=…]
    python scripts/train_wl_velocity.py --eval-only [--run-dir logs/wl_velocity/<time>]

Training is `batonlab train`'s own entry (`batonlab.cli.train.train`): the run folder holds
config.yaml, atomic checkpoints and TensorBoard logs under logs/<task>/<time>/, so `batonlab play
task=wl_velocity` finds it afterwards, and Ctrl-C saves the last iteration. The evaluation rebuilds
the task's play config on a flat plane (no pushes, no observation noise; friction, mass, gains and
latency stay randomised), commands 1 m/s straight ahead at the nominal height, and reports the mean
|v_x - 1| over all envs after a settling time, with the steps and wall time the training took.
Target: mean absolute error < 0.15 m/s.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from batonlab.observations.root_state import root_lin_vel_heading
from batonlab.cli import train as cli_train
from batonlab.cli.common import CliError, build_invocation, find_checkpoint, find_run_dir
from batonlab.env.env import BatonEnv
from batonlab.rl.rollout import rollout
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.robots.wheel_legged import NOMINAL_BASE_HEIGHT
from batonlab.tasks.mobile_robot import COMMAND
from batonlab.terrain import TerrainCfg

PROGRESS_KEYS = {"return": "Train/mean_return", "len": "Train/mean_episode_length", "success": "Episode/success_rate",
                 "vx_track": "Episode_Reward/track_lin_vel_x", "level": "Curriculum/terrain_levels/mean_level",
                 "vx_max": "Curriculum/command_range/lin_vel_x_high", "steps/s": "Perf/steps_per_s"}
"""Statistics printed every `--print-every` iterations."""


def train(args, overrides: list[str]) -> tuple[Path, dict]:
    """Train with `batonlab train`'s entry; its closing success-rate evaluation is replaced by the tracking one."""
    inv = build_invocation([f"task={args.task}", f"seed={args.seed}", f"env.num_envs={args.num_envs}",
                            f"max_iterations={args.iterations}", "progress=false", "eval_episodes=0", *overrides])
    start = time.perf_counter()

    def report(runner: BatonRunner, stats: dict[str, float]) -> None:
        if runner.iteration % args.print_every == 0 or runner.iteration == args.iterations:
            shown = " ".join(f"{k} {stats[v]:.3g}" for k, v in PROGRESS_KEYS.items() if v in stats)
            print(f"  it {runner.iteration:4d}  {time.perf_counter() - start:6.0f} s  {shown}", flush=True)

    result = cli_train.train(inv, on_iteration=report)
    if result.interrupted:
        print(f"[train_wl_velocity] interrupted at iteration {result.iterations}: saved {result.checkpoint}")
        sys.exit(cli_train.INTERRUPTED)
    info = {"iterations": result.iterations, "env_steps": result.env_steps, "train_wall_s": result.wall_s}
    (result.run_dir / "train_summary.json").write_text(json.dumps(info, indent=2))
    return result.run_dir, info


@torch.inference_mode()
def evaluate_tracking(task: str, run_dir: Path, num_envs: int, duration_s: float, settle_s: float, speed: float,
                      checkpoint: str | None = None) -> dict:
    """Mean |v_x - speed| on flat ground, per step and env, after `settle_s` of each env's run."""
    inv = build_invocation([f"task={task}", f"run_dir={run_dir}"] + ([f"checkpoint={checkpoint}"] if checkpoint else []),
                           play=True)
    cfg = inv.task
    cfg.num_envs = num_envs
    cfg.scene.terrain = TerrainCfg(kind="plane")
    cfg.episode_length_s = duration_s + 1.0
    env = BatonEnv(cfg)
    runner = BatonRunner(RslRlVecEnv(env), inv.agent, log_dir=None, device="cpu")
    ckpt = find_checkpoint(inv.top, run_dir)
    runner.load(ckpt, load_optimizer=False)
    policy = runner.inference_policy()
    env.reset()
    command = env.command_manager.terms[COMMAND]
    command.command[:] = torch.tensor([speed, 0.0, NOMINAL_BASE_HEIGHT])
    command.time_left[:] = float("inf")
    obs = env.observation_manager.compute()
    alive = torch.ones(num_envs, dtype=torch.bool)
    errors, steps = [], round(duration_s / env.step_dt)
    for transition in rollout(env, obs, policy, steps):
        alive &= ~transition.terminated
        if transition.index * env.step_dt >= settle_s:
            vx = root_lin_vel_heading(env)[:, 0]
            errors.append(torch.where(alive, (vx - speed).abs(), torch.nan))
    error = torch.stack(errors)
    env.close()
    return {
        "checkpoint": str(ckpt),
        "speed_command": speed,
        "num_envs": num_envs,
        "duration_s": duration_s,
        "settle_s": settle_s,
        "mean_abs_error": float(error.nanmean()),
        "mean_speed_error_per_env_max": float(error.nanmean(dim=0).max()),
        "survival_rate": float(alive.float().mean()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="wl_velocity")
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--print-every", type=int, default=10)
    parser.add_argument("--eval-only", action="store_true", help="skip training; evaluate --run-dir or the latest run")
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("--checkpoint", default=None, help="with --eval-only: a model_<it>.pt (default: the newest)")
    parser.add_argument("--eval-envs", type=int, default=64)
    parser.add_argument("--eval-duration", type=float, default=10.0, help="seconds of driving per env [s]")
    parser.add_argument("--settle", type=float, default=2.0, help="seconds ignored while the robot accelerates [s]")
    parser.add_argument("--speed", type=float, default=1.0, help="forward speed command [m/s]")
    args, overrides = parser.parse_known_args()
    info: dict = {}
    try:
        if args.eval_only:
            inv = build_invocation([f"task={args.task}"] + ([f"run_dir={args.run_dir}"] if args.run_dir else []))
            run_dir = find_run_dir(inv.top, inv.agent.experiment_name)
            summary = run_dir / "train_summary.json"
            info = json.loads(summary.read_text()) if summary.is_file() else {}
        else:
            run_dir, info = train(args, overrides)
    except CliError as err:
        print(f"train_wl_velocity: {err}", file=sys.stderr)
        return 2
    result = {**info, **evaluate_tracking(args.task, run_dir, args.eval_envs, args.eval_duration, args.settle, args.speed,
                                          args.checkpoint)}
    name = "tracking_eval.json"
    if args.checkpoint:
        info = {}  # the training summary belongs to the last checkpoint, not this one
        result = {k: v for k, v in result.items() if k not in ("iterations", "env_steps", "train_wall_s")}
        name = f"tracking_eval_{Path(args.checkpoint).stem}.json"
    (run_dir / name).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))
    verdict = "PASS" if result["mean_abs_error"] < 0.15 else "FAIL"
    print(f"[train_wl_velocity] {verdict}: mean |v - {args.speed}| = {result['mean_abs_error']:.3f} m/s on flat ground"
          + (f" after {info['env_steps']} env steps, {info['train_wall_s'] / 60:.1f} min" if info else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
