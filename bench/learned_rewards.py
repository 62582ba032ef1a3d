# SPDX-License-Identifier: BSD-3-Clause
"""Sparse-only training vs. the three learned rewards, at equal env steps, on `arm_reach_sparse`.

    python bench/learned_rewards.py [--iterations 40] [--num-envs 256] [--seeds 0 1]
                                    [--variants sparse potential counts progress] [--out bench_results/learned_rewards]

Every variant trains the same task (reward: 5/s while the tool is within 3 cm of the target, plus
small regularisers) from scratch with the same seeds, envs and iterations, and is judged by the
task's success term on the same 128 play episodes. What each variant adds:
- `sparse`: nothing;
- `potential`: γΦ(s′) − Φ(s), Φ fitted on preference labels of rendered frames asked through the
  chat-completions API of the local stand-in VLM server (answering from the frames' true progress):
  the VLM path with the scripted labeller behind it (`batonlab reward fit-potential labeller=stand-in`);
- `counts`: β/√n(bin) over a progress function written by the stand-in LLM (template writer), checked
  in the sandbox and run there every step (`batonlab reward write-progress llm=stand-in`);
- `progress`: max(0, p − best p) from frames matched to ONE demonstration (a rollout of an `arm_reach`
  policy trained on the dense reward), with a time-contrastive encoder fitted on rollouts of
  `arm_reach` and `arm_lift` (`batonlab reward fit-progress`).
The learned parts are built once (not counted in the env steps) and shared by all seeds. Writes
`results.json` and `curves.png` (training success rate vs env steps per variant).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from batonlab.cli import train as cli_train
from batonlab.cli.common import build_invocation
from batonlab.env.cfg import RewardTermCfg
from batonlab.env.env import BatonEnv
from batonlab.rl.evaluate import evaluate
from batonlab.tasks import make_agent_cfg, make_task_cfg

TASK = "arm_reach_sparse"
VARIANTS = ("sparse", "potential", "counts", "progress")


def build_potential(out: Path) -> dict:
    from batonlab.cli.reward_potential import PotentialOptions, fit

    # Φ reads the tool point and the target (what the labeller judges); with every field of the group
    # (joint velocities, last action) 1000 labels fit the random states but Φ did not carry to the
    # states a learning policy reaches (play success 0.23 vs 1.00 at 256 envs x 40 iterations).
    options = PotentialOptions(task=TASK, labeller="stand-in", fields=["ee_pos", "ee_target"], out=str(out / "potential.pt"))
    start = time.perf_counter()
    result, path = fit(options)
    return {"params": {"potential": str(path)}, "seconds": time.perf_counter() - start,
            "heldout_accuracy": result.heldout_accuracy, "pairs": result.num_pairs}


def build_counts(out: Path) -> dict:
    from batonlab.cli.reward_write_progress import run

    path = out / "progress_fn.py"
    start = time.perf_counter()
    if run([f"task={TASK}", "llm=stand-in", f"out={path}"]) != 0:
        raise RuntimeError("write-progress failed")
    return {"params": {"function": str(path)}, "seconds": time.perf_counter() - start}


def build_progress(out: Path, seed: int, render_every: int = 1, num_rendered: int = 64,
                   confidence_threshold: float = 0.5) -> dict:
    """A dense-reward arm_reach policy gives the one demonstration; the encoder learns from rollouts of two tasks."""
    from batonlab.cli.reward_progress import ProgressOptions, fit

    from batonlab.cli.main import main as batonlab

    start = time.perf_counter()
    logs = out / "demo_policy"
    if batonlab(["train", "task=arm_reach", "env.num_envs=1024", f"seed={seed}", f"log_root={logs}", "eval_episodes=0"]) != 0:
        raise RuntimeError("training the demo policy failed")
    run_dir = sorted((logs / "arm_reach").iterdir())[-1]
    # The policy's episodes (and the demo, the first of them) stop where the reach is done: the policy is
    # at its target within about 10 control steps, and a demo that then holds still for 190 more frames
    # spreads its progress over frames that differ only by embedding jitter.
    options = ProgressOptions(tasks=["arm_reach", "arm_lift"], policy=str(run_dir), policy_steps=12,
                              demo_out=str(out / "demo.npz"), out=str(out / "encoder.pt"), seed=seed)
    fit(options)
    return {"params": {"encoder": options.out, "demo": options.demo_out, "render_every": render_every,
                       "num_rendered": num_rendered, "restart_on": "ee_target",
                       "confidence_threshold": confidence_threshold}, "seconds": time.perf_counter() - start}


def term_cfg(variant: str, params: dict) -> tuple[str, RewardTermCfg]:
    if variant == "potential":
        return "potential", RewardTermCfg(func=_learned().PotentialShaping, params={"gamma": 0.99, **params}, weight=1.0)
    if variant == "counts":
        return "count_bonus", RewardTermCfg(func=_learned().ProgressCountBonus, params={"beta": 20.0, "bins": 20, **params},
                                            weight=1.0)
    from batonlab.rewards.progress import ProgressReward

    return "progress", RewardTermCfg(func=ProgressReward, params=params, weight=5.0)


def _learned():
    from batonlab.rewards import learned

    return learned


def train(variant: str, params: dict | None, seed: int, num_envs: int, iterations: int, log_root: Path) -> dict:
    """Train one variant from scratch with `batonlab train`'s entry (a run folder under `log_root`), then play it."""
    inv = build_invocation([f"task={TASK}", f"seed={seed}", f"env.num_envs={num_envs}", f"max_iterations={iterations}",
                            f"log_root={log_root}", "eval_episodes=0"])
    if params is not None:
        name, term = term_cfg(variant, params)
        inv.task.rewards[name] = term
    curve: list[float] = []
    trained = cli_train.train(
        inv, on_iteration=lambda _r, stats: curve.append(float(stats.get("Episode/success_rate", 0.0))))
    play = make_task_cfg(TASK, play=True)
    play.num_envs, play.seed = 128, 10_000 + seed
    play_env = BatonEnv(play)
    success = float(evaluate(play_env, trained.policy, progress=False).success_rate)
    play_env.close()
    return {"variant": variant, "seed": seed, "env_steps": trained.env_steps, "train_seconds": trained.wall_s,
            "success": success, "train_success": curve}


def plot(results: list[dict], path: Path, steps_per_iteration: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    for k, variant in enumerate(dict.fromkeys(r["variant"] for r in results)):
        runs = [r for r in results if r["variant"] == variant]
        curve = torch.tensor([r["train_success"] for r in runs]).mean(0)
        steps = (torch.arange(len(curve)) + 1) * steps_per_iteration / 1e6
        final = sum(r["success"] for r in runs) / len(runs)
        ax.plot(steps, curve, color=f"C{k}", label=f"{variant} (play success {final:.2f})")
    ax.set_xlabel("env steps [M]")
    ax.set_ylabel("training success rate")
    ax.set_title(f"{TASK}: sparse reward vs learned rewards")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--out", type=Path, default=Path("bench_results/learned_rewards"))
    parser.add_argument("--progress-render", type=int, nargs=2, default=(1, 64), metavar=("EVERY", "ENVS"),
                        help="the progress reward renders ENVS envs every EVERY control steps")
    parser.add_argument("--progress-confidence", type=float, default=0.5,
                        help="the progress reward pays estimates whose match margin is at least this")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    builders = {"potential": lambda: build_potential(args.out), "counts": lambda: build_counts(args.out),
                "progress": lambda: build_progress(args.out, args.seeds[0], *args.progress_render,
                                                   args.progress_confidence)}
    built = {}
    for variant in args.variants:
        if variant in builders:
            print(f"[bench] building the {variant} reward", file=sys.stderr)
            built[variant] = builders[variant]()
    results = []
    for seed in args.seeds:
        for variant in args.variants:
            print(f"[bench] {variant}, seed {seed}", file=sys.stderr)
            results.append(train(variant, built.get(variant, {}).get("params"), seed, args.num_envs, args.iterations,
                                 args.out / "logs"))
            (args.out / "results.json").write_text(json.dumps({"built": built, "runs": results}, indent=1))
    steps_per_iteration = make_agent_cfg(TASK).num_steps_per_env * args.num_envs
    plot(results, args.out / "curves.png", steps_per_iteration)
    print(f"\n{'variant':10s} {'env steps':>10s} {'play success':>13s} {'final train success':>20s} {'train s':>8s}")
    for variant in args.variants:
        runs = [r for r in results if r["variant"] == variant]
        success, seconds = (sum(r[key] for r in runs) / len(runs) for key in ("success", "train_seconds"))
        final = sum(r["train_success"][-1] for r in runs) / len(runs)
        print(f"{variant:10s} {runs[0]['env_steps']:>10d} {success:>13.2f} {final:>20.2f} {seconds:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
