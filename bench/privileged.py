# SPDX-License-Identifier: BSD-3-Clause
"""Privileged training vs. plain training on a contact-rich task, at equal env steps, judged at λ = 0.

    python bench/privileged.py [--task arm_push_grasp] [--num-envs 512] [--iterations 300] [--seeds 0]
                               [--variants privileged plain] [--eval-episodes 64] [--out bench_results/privileged]

Variants, each trained from scratch on the same seeds, envs and iterations:
- `privileged`: the task's defaults: privileges on (λ = 1 at the start) and the privilege schedule;
- `plain`: the same task with λ = 0 throughout (no virtual forces, all contacts on, no schedule);
- `force_actions`: privileges given as extra policy outputs (`VirtualForceAction` on the object)
  instead of the attraction rule, with the same contact relaxations and schedule.
Every policy is then tested at λ = 0 on the same play episodes. The table gives the success rate,
how high the object got in hand, the fraction of steps the tool point spent parked at the object
(its centre within the object's largest half size + 5 cm) without the object lifted 2 cm, and the final λ of the training. A video of the first test episodes of each
variant is written next to `results.json`.

The published finding this checks: without privileges the policy stalls, its gripper parked on the
object without lifting it; with privileges and the schedule it lifts the object at λ = 0.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from batonlab.cli import train as cli_train
from batonlab.cli.common import build_invocation
from batonlab.env.cfg import ActionTermCfg
from batonlab.env.env import BatonEnv
from batonlab.observations.objects import body_pos
from batonlab.privileges.virtual_forces import VirtualForceAction
from batonlab.rl.evaluate import evaluate
from batonlab.sim.render import write_mp4
from batonlab.tasks import make_task_cfg

VARIANTS = ("privileged", "plain", "force_actions")
PARK_MARGIN = 0.05
"""The tool point is parked at the object within the object's largest half size plus this [m]."""


@dataclass
class VariantResult:
    name: str
    seed: int
    env_steps: int
    train_time_s: float
    final_level: float
    train_success: float
    """Success rate of the last training iteration (at the training's λ)."""
    success: float
    """Success rate at λ = 0 on the test episodes."""
    max_lift_in_hand: float
    """Mean over test episodes of the highest lift of the object while in hand [m]."""
    parked_fraction: float
    """Fraction of test steps with the tool parked at the object and the object not lifted 2 cm."""
    levels: list[float] = field(default_factory=list)
    """λ after every training iteration."""


def apply_variant(cfg, variant: str) -> None:
    """Edit a task config into `variant` (`privileged` is the task as it is)."""
    if variant == "plain":
        cfg.privilege_level = 0.0
        cfg.curriculum.pop("privilege", None)
    elif variant == "force_actions":
        cfg.privileges.pop("attraction")
        cfg.actions["virtual_force"] = ActionTermCfg(cls=VirtualForceAction, joints=(), params={"body": "object", "max_force": 6.0})


def train(task: str, variant: str, seed: int, num_envs: int, iterations: int, log_root: Path):
    """Train one variant from scratch with `batonlab train`'s entry (a run folder under `log_root`)."""
    inv = build_invocation([f"task={task}", f"seed={seed}", f"env.num_envs={num_envs}", f"max_iterations={iterations}",
                            f"log_root={log_root}", "eval_episodes=0"])
    apply_variant(inv.task, variant)
    levels: list[float] = []

    def record(runner, stats: dict[str, float]) -> None:
        levels.append(runner.env.env.privilege_manager.level)

    result = cli_train.train(inv, on_iteration=record)
    return result, levels


@torch.inference_mode()
def test(task: str, variant: str, policy, seed: int, episodes: int, video: Path | None) -> dict:
    """One episode per env at λ = 0 (the play task); privileged actions, if any, act at λ = 0, i.e. not at all."""
    cfg = make_task_cfg(task)
    cfg.num_envs, cfg.seed = episodes, 10_000 + seed
    apply_variant(cfg, variant)
    play = make_task_cfg(task, play=True)
    cfg.privilege_level, cfg.curriculum, cfg.observations = 0.0, {}, play.observations
    env = BatonEnv(cfg)
    event = env.event_manager.terms["object"]
    reach = float(event.nominal_half.max()) + PARK_MARGIN
    in_hand = cfg.success.params["radius"]
    best_lift = torch.zeros(episodes)
    parked, steps = torch.zeros(()), torch.zeros(())
    counting = torch.ones(episodes, dtype=torch.bool)

    def measure(env, obs, actions, done) -> None:
        nonlocal parked, steps
        if done is None:
            return
        distance = (env.sim.sensor("ee_pos_w") - body_pos(env, "object")).norm(dim=1)
        lift = body_pos(env, "object")[:, 2] - event.half_height
        held = distance < in_hand
        best_lift[counting & held] = torch.maximum(best_lift, lift)[counting & held]
        parked += (counting & (distance < reach) & (lift < 0.02)).sum()
        steps += counting.sum()
        counting.logical_and_(~done)

    video_ids = (0, 1, 2, 3) if video is not None else ()
    result = evaluate(env, policy, video_env_ids=video_ids, video_size=(240, 320), progress=False, step_callback=measure)
    if video is not None and result.frames:
        write_mp4(str(video), result.frames, fps=1.0 / env.step_dt)
    env.close()
    return {"success": result.success_rate, "max_lift_in_hand": float(best_lift.clamp_min(0).mean()),
            "parked_fraction": float(parked / steps.clamp_min(1))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="arm_push_grasp")
    parser.add_argument("--num-envs", type=int, default=512)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--variants", nargs="+", default=["privileged", "plain"], choices=VARIANTS)
    parser.add_argument("--eval-episodes", type=int, default=64)
    parser.add_argument("--out", type=Path, default=Path("bench_results/privileged"))
    parser.add_argument("--no-video", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("MUJOCO_GL", "egl")

    results: list[VariantResult] = []
    for seed in args.seeds:
        for variant in args.variants:
            print(f"[privileged] training {args.task} / {variant}, seed {seed}: {args.num_envs} envs × "
                  f"{args.iterations} iterations")
            trained, levels = train(args.task, variant, seed, args.num_envs, args.iterations, args.out / "logs")
            video = None if args.no_video else args.out / f"{args.task}_{variant}_seed{seed}.mp4"
            scores = test(args.task, variant, trained.policy, seed, args.eval_episodes, video)
            results.append(VariantResult(variant, seed, trained.env_steps, trained.wall_s,
                                         levels[-1] if levels else float("nan"),
                                         trained.stats.get("Episode/success_rate", float("nan")), levels=levels,
                                         **scores))
            print(f"[privileged] {variant}: success at λ=0 {scores['success']:.2f}, final λ {results[-1].final_level:.2f}")

    print(f"\n{args.task}: each variant {results[0].env_steps / 1e6:.2f}M env steps, tested at λ = 0 on "
          f"{args.eval_episodes} episodes\n")
    print(f"{'variant':14s} {'seed':>4s} {'final λ':>8s} {'train succ':>10s} {'succ λ=0':>9s} {'lift in hand':>12s} "
          f"{'parked':>7s} {'train min':>9s}")
    for r in results:
        print(f"{r.name:14s} {r.seed:4d} {r.final_level:8.2f} {r.train_success:10.2f} {r.success:9.2f} "
              f"{r.max_lift_in_hand:12.3f} {r.parked_fraction:7.2f} {r.train_time_s / 60:9.1f}")
    (args.out / "results.json").write_text(json.dumps([asdict(r) for r in results], indent=1))
    print(f"\n[privileged] results: {args.out / 'results.json'}")


if __name__ == "__main__":
    main()
