# SPDX-License-Identifier: BSD-3-Clause
"""Domain randomisation centred on a fit against the task's default: arm_reach trained both ways, tested on the robot
the fit identified.

    python bench/sysid_dr.py [--seeds 0 1] [--num-envs 1024] [--iterations 80] [--episodes 256]
                             [--out bench_results/sysid_dr]

The "robot" is arm_reach's simulator with armature ×3, damping ×0.5, friction loss 0.3 N·m and 20 ms of command delay
on the arm's joints, its joint randomisation off. Eight 2 s episodes of it, the arm driven by sums of sines, are
recorded as `play record=` records them; `batonlab sysid` fits armature, damping, friction loss (per joint) and the
delay to them and writes `randomization.txt`. Per seed, `default` trains with the task as it is and `fit` with those
overrides (`env.scene.fit=` and the joint randomisation centred on the fit), each for `--iterations` on
`--num-envs` envs; both are tested on the robot and on the nominal model with the task's randomisation (as `play`
runs it), `--episodes` episodes at seed 10 000 + seed: success rate and the mean end-effector error over the
episode. `results.json` keeps every number.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import numpy as np
import torch

from batonlab.cli import sysid as cli_sysid
from batonlab.cli import train as cli_train
from batonlab.cli.common import build_invocation
from batonlab.env.env import BatonEnv
from batonlab.env.scene import scene_spec
from batonlab.logs.sim_recorder import EpisodeRecorder
from batonlab.rl.evaluate import evaluate
from batonlab.robots.arm6 import ARM_JOINTS
from batonlab.robots.fitted import FitOverlay, group_value, write_fit

TASK = "arm_reach"


def robot_cfg(truth: Path, num_envs: int, seed: int):
    """arm_reach's play configuration as the identified robot: the truth over its model, its joints not redrawn."""
    cfg = build_invocation([f"task={TASK}"], play=True).task
    del cfg.events["joint_params"]
    cfg.scene.fit = str(truth)
    cfg.num_envs, cfg.seed = num_envs, seed
    return cfg


def record(truth: Path, out: Path, episodes: int = 8) -> list[Path]:
    """`episodes` 2 s episodes of the robot driven by sums of sines (0.5–3 Hz), recorded as `play record=` does."""
    cfg = robot_cfg(truth, episodes, 0)
    cfg.episode_length_s = 2.0
    env = BatonEnv(cfg)
    rng = np.random.default_rng(0)
    freq = rng.uniform(0.5, 3.0, (episodes, 3, 6))
    amp, phase = rng.uniform(0.2, 0.5, (episodes, 3, 6)), rng.uniform(0.0, 2 * np.pi, (episodes, 3, 6))
    steps = iter(range(10**6))

    def sines(obs):
        t = next(steps) * env.step_dt
        return torch.as_tensor((amp * np.sin(2 * np.pi * freq * t + phase)).sum(axis=1), dtype=torch.float32)

    recorder = EpisodeRecorder(env, out, episodes, TASK, prefix=TASK)
    evaluate(env, sines, progress=False, step_callback=recorder)
    env.close()
    return recorder.close()


def test(policy, truth: Path | None, episodes: int, seed: int) -> dict:
    """Success rate and mean end-effector error [m] of `policy` on the robot (`truth` None: on the nominal model with
    the task's randomisation, as `batonlab play` runs it)."""
    if truth is None:
        cfg = build_invocation([f"task={TASK}"], play=True).task
        cfg.num_envs, cfg.seed = episodes, 10_000 + seed
    else:
        cfg = robot_cfg(truth, episodes, 10_000 + seed)
    env = BatonEnv(cfg)
    result = evaluate(env, policy, progress=False)
    env.close()
    errors = {k: float(np.mean(v)) for k, v in result.mean_errors.items()}
    return {"success": result.success_rate, "mean_errors": errors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--num-envs", type=int, default=1024)
    parser.add_argument("--iterations", type=int, default=80)
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--out", type=Path, default=Path("bench_results/sysid_dr"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    cfg = build_invocation([f"task={TASK}"], play=True).task
    nominal, _ = scene_spec(cfg.scene, cfg.sim)
    truth = write_fit(args.out / "truth.yaml", FitOverlay(
        values={j: {"armature": 3.0 * group_value(nominal, j, "armature"),
                    "damping": 0.5 * group_value(nominal, j, "damping"), "frictionloss": 0.3} for j in ARM_JOINTS},
        command_delay_s=0.02))
    shutil.rmtree(args.out / "bags", ignore_errors=True)
    bags = record(truth, args.out / "bags")
    fit_dir = args.out / "fit"
    cli_sysid.run([*map(str, bags), "params=armature,damping,frictionloss,delay", f"out={fit_dir}", "max_iters=10",
                   "max_delay_s=0.04", "report=false"])
    overrides = (fit_dir / "randomization.txt").read_text().split()
    results = {"overrides": overrides, "runs": []}
    for seed in args.seeds:
        for name, extra in (("default", []), ("fit", overrides)):
            inv = build_invocation([f"task={TASK}", f"seed={seed}", f"env.num_envs={args.num_envs}",
                                    f"max_iterations={args.iterations}", f"log_root={args.out / 'logs'}",
                                    "eval_episodes=0", "progress=false", *extra])
            trained = cli_train.train(inv)
            row = {"dr": name, "seed": seed, "wall_s": trained.wall_s, "env_steps": trained.env_steps,
                   "run_dir": str(trained.run_dir), **test(trained.policy, truth, args.episodes, seed),
                   "nominal": test(trained.policy, None, args.episodes, seed)}
            print(f"[sysid_dr] {row}", flush=True)
            results["runs"].append(row)
            (args.out / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
