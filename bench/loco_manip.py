# SPDX-License-Identifier: BSD-3-Clause
"""Arm-constrained loco-manipulation: PPO vs P3O vs PPO-Lagrangian, with and without the curricula,
at equal env steps and equal seeds, judged on one common test.

    python bench/loco_manip.py [--num-envs 512] [--iterations 150] [--seeds 0] [--variants ppo p3o+cur ...]
                               [--arms joint_position ik_residual ik_pose] [--eval-episodes 256] [--out bench_results/loco_manip] [--resume]
                               [--override KEY=VALUE ... --label NAME]

Each variant trains `wl_loco_manip` from scratch with the same seeds, envs and iterations; only the
algorithm (`agent.algorithm.class_name`), the curricula (arm workspace, reward balance, cost-limit
schedule: all on or all off) and the arm's action (`--arms`: joint positions, `wl_loco_manip`; a residual
on a damped least-squares IK step, `wl_loco_manip_ik`; the same toward a tool pose, `wl_loco_manip_pose`,
whose settled orientation error the table adds) differ. Every trained policy is then evaluated on the same episodes of
the final task: the widest target ranges, the final cost limits, no curricula. The table gives, per
variant: base speed error (over all steps, and settled: from 1 s after each speed draw), end-effector
error, survival, and per cost the violation rate (steps with cost > 0) on the test, over the last
training iterations and over all of training (the stochastic policy), and the mean episode cost on the
test; with several seeds, mean ± standard deviation. A figure (`curricula.png`) shows the curricula over
training and, per variant, the arm and speed tracking rewards, episode length and each cost's violation
rate over training (mean over seeds, min-max shaded); `results.json` keeps every number, written after
each run, and `--resume` trains only the runs it lacks (a table built over several sessions).

The published claim this checks: the constrained variants violate less at comparable tracking, and
without the arm-constrained curriculum the arm tracks clearly worse.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from batonlab.cli import train as cli_train
from batonlab.cli.common import build_invocation
from batonlab.env.env import BatonEnv
from batonlab.observations.root_state import root_lin_vel_heading
from batonlab.rl.evaluate import evaluate
from batonlab.tasks import make_agent_cfg
from batonlab.tasks.wl_loco_manip import EE_COMMAND, EE_QUAT_SENSOR, EE_SENSOR
from batonlab.utils.files import atomic_write_text
from batonlab.utils.quaternions import quat_angle_between

ARM_TASKS = {"joint_position": "wl_loco_manip", "ik_residual": "wl_loco_manip_ik", "ik_pose": "wl_loco_manip_pose"}
"""Arm action → the task that trains with it."""

VARIANTS: dict[str, tuple[str, bool]] = {
    "p3o+cur": ("P3O", True),
    "p3o": ("P3O", False),
    "ppo+cur": ("PPO", True),
    "ppo": ("PPO", False),
    "lagrangian+cur": ("PPOLagrangian", True),
}
"""Variant name → (algorithm class name, curricula on)."""

TRACKED = ("Curriculum/arm_workspace/progress", "Curriculum/arm_workspace/score", "Curriculum/reward_balance/scale_base",
           "Curriculum/reward_balance/scale_arm", "Episode_Reward/ee_track", "Episode_Reward/track_lin_vel_x",
           "Train/mean_episode_length")
"""Training statistics kept per iteration for the figure (plus every `Cost/*/limit` and violation rate)."""


SPEED_SETTLE_S = 1.0
"""The settled speed error skips this long after each base velocity draw [s] (a step of up to 2 m/s takes ~1 s)."""

TRAIN_WINDOW = 20
"""Iterations at the end of training over which the training-time violation rates are averaged."""


@dataclass
class VariantResult:
    name: str
    seed: int
    speed_error: float
    """Mean |v − v_cmd| over the test episodes [m/s]."""
    ee_error: float
    """Mean end-effector error over the test episodes [m]."""
    settled_ee_error: float
    """Mean end-effector error over the steps whose target finished gliding [m]."""
    stowed_ee_error: float
    """The same for an arm left stowed (what an untrained policy's zero mean action holds) [m]."""
    survival: float
    violation_rate: dict[str, float]
    """Per cost: fraction of test steps with cost > 0."""
    episode_cost: dict[str, float]
    """Per cost: mean sum over a test episode."""
    train_time_s: float
    history: dict[str, list[float]] = field(default_factory=dict)
    arm: str = "joint_position"
    """The arm's action (a key of `ARM_TASKS`)."""
    settled_orient_error: float = float("nan")
    """Mean tool orientation error over the steps whose target finished gliding, for pose targets [rad]."""
    settled_speed_error: float = float("nan")
    """Mean |v − v_cmd| over the steps at least `SPEED_SETTLE_S` after the speed was drawn [m/s]."""
    label: str = ""
    """`--label` of the run: names a setting trained with `--override`s (e.g. an IK gain)."""
    overrides: list[str] = field(default_factory=list)
    """The `--override`s the run trained and was tested with."""
    env_steps: int = 0
    """The training budget: envs × steps per env per iteration × iterations."""

    @property
    def display_name(self) -> str:
        """The variant, with the label of its setting if any."""
        return f"{self.name} [{self.label}]" if self.label else self.name

    @property
    def key(self) -> tuple[str, str, int, str, int]:
        """(variant, arm, seed, label, env steps): what `--resume` matches."""
        return self.name, self.arm, self.seed, self.label, self.env_steps

    def train_violation_rate(self, cost: str, last: int | None = TRAIN_WINDOW) -> float:
        """Fraction of steps in violation over the last `last` training iterations (None: all of them;
        the stochastic policy)."""
        values = self.history.get(f"Cost/{cost}/violation_rate", [])
        return float(np.mean(values[-last:] if last else values)) if values else float("nan")


def train(name: str, task: str, seed: int, num_envs: int, iterations: int, log_root: Path,
          overrides: list[str] = ()) -> tuple[object, dict[str, list[float]], float]:
    """Train one variant from scratch with `batonlab train`'s entry (a run folder under `log_root`), with the
    task's `key=value` overrides; returns the inference policy, the per-iteration history, seconds."""
    class_name, curricula = VARIANTS[name]
    inv = build_invocation([f"task={task}", f"seed={seed}", f"env.num_envs={num_envs}", f"max_iterations={iterations}",
                            f"agent.algorithm.class_name={class_name}", f"log_root={log_root}",
                            "eval_episodes=0", "progress=false", *overrides])
    if not curricula:
        inv.task.curriculum = {}
    history: dict[str, list[float]] = {}

    def record(_runner, stats: dict[str, float]) -> None:
        for key, value in stats.items():
            if key in TRACKED or (key.startswith("Cost/") and key.endswith(("/limit", "/violation_rate"))):
                history.setdefault(key, []).append(value)

    result = cli_train.train(inv, on_iteration=record)
    if result.interrupted or result.iterations != iterations:
        # A stopped run is not a result: --resume would keep it as if it had trained the whole budget.
        raise SystemExit(f"[loco_manip] {name} seed {seed} stopped after {result.iterations} of {iterations} "
                         f"iterations ({result.run_dir}); not recorded")
    return result.policy, history, result.wall_s


def test(policy, task: str, seed: int, episodes: int, overrides: list[str] = ()) -> dict:
    """The common test: one episode per env on the final task (widest targets, final limits, no curricula),
    with the run's task overrides."""
    cfg = build_invocation([f"task={task}", *overrides], play=True).task
    cfg.num_envs, cfg.seed = episodes, 10_000 + seed
    cfg.curriculum = {}
    env = BatonEnv(cfg)
    names = env.cost_manager.names
    target = env.command_manager.terms[EE_COMMAND]
    base = env.command_manager.terms["base_velocity"]
    settled_speed = torch.zeros(2)  # sum of |v − v_cmd| [m/s], steps
    settled = torch.zeros(4)  # policy error, stowed-arm error, steps, orientation error: targets done gliding
    pose = target.dim == 7
    cost_sum = torch.zeros(episodes, len(names))
    violations = torch.zeros(len(names))
    steps = torch.zeros(())
    counting = torch.ones(episodes, dtype=torch.bool)

    def count_costs(env, obs, actions, done) -> None:
        nonlocal steps
        if done is None:
            return
        costs = env.extras["costs"].cpu()
        cost_sum[counting] += costs[counting]
        still = counting & (target.phase >= 1.0).cpu()
        errors = [torch.linalg.vector_norm(p - target.command[:, :3], dim=-1).cpu()[still].sum()
                  for p in (env.sim.sensor(EE_SENSOR), target.stowed_position)]
        angle = quat_angle_between(env.sim.sensor(EE_QUAT_SENSOR), target.command[:, 3:]) if pose else torch.zeros(1)
        settled.add_(torch.stack([*errors, still.sum(), angle.cpu()[still].sum() if pose else torch.zeros(())]))
        steady = counting & (base.time_since_draw >= SPEED_SETTLE_S).cpu()
        speed_error = (root_lin_vel_heading(env, base.joint)[:, 0] - base.command[:, 0]).abs().cpu()
        settled_speed.add_(torch.stack([speed_error[steady].sum(), steady.sum()]))
        violations.add_((costs[counting] > 0).float().sum(dim=0))
        steps += counting.sum()
        counting.logical_and_(~done.cpu())

    result = evaluate(env, policy, progress=False, step_callback=count_costs)
    env.close()
    return {
        "speed_error": float(result.mean_errors["base_velocity/lin_vel_error"].mean()),
        "ee_error": float(result.mean_errors[f"{EE_COMMAND}/ee_error"].mean()),
        "survival": float(1.0 - result.terminated.mean()),
        "settled_ee_error": float(settled[0] / settled[2].clamp(min=1)),
        "stowed_ee_error": float(settled[1] / settled[2].clamp(min=1)),
        "settled_orient_error": float(settled[3] / settled[2].clamp(min=1)) if pose else float("nan"),
        "settled_speed_error": float(settled_speed[0] / settled_speed[1].clamp(min=1)),
        "violation_rate": {n: float(violations[k] / steps) for k, n in enumerate(names)},
        "episode_cost": {n: float(cost_sum[:, k].mean()) for k, n in enumerate(names)},
    }


def table(results: list[VariantResult]) -> str:
    """Per variant and arm: mean ± standard deviation over seeds (± omitted for one seed)."""
    names = list(results[0].violation_rate)
    by_variant: dict[tuple[str, str], list[VariantResult]] = {}
    for r in results:
        by_variant.setdefault((r.display_name, r.arm), []).append(r)
    header = ["variant", "arm", "speed err [m/s] (settled)", "ee err [m]", "settled ee err [m] (stowed)",
              "settled orient. err [rad]", "survival"]
    header += [f"{n} viol. test / train last {TRAIN_WINDOW} it. / train all" for n in names]
    header += [f"{n} ep. cost" for n in names]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for (name, arm), runs in by_variant.items():
        def stat(field, digits: int = 3, runs=runs) -> str:
            values = [field(r) for r in runs]
            text = f"{np.mean(values):.{digits}f}"
            return text + (f" ± {np.std(values):.{digits}f}" if len(values) > 1 else "")

        row = [f"{name} (n={len(runs)})", arm, f"{stat(lambda r: r.speed_error)} ({stat(lambda r: r.settled_speed_error)})",
               stat(lambda r: r.ee_error),
               f"{stat(lambda r: r.settled_ee_error)} ({stat(lambda r: r.stowed_ee_error)})",
               stat(lambda r: r.settled_orient_error) if arm == "ik_pose" else "-", stat(lambda r: r.survival)]
        row += [f"{stat(lambda r, n=n: r.violation_rate[n], 4)} / {stat(lambda r, n=n: r.train_violation_rate(n), 4)}"
                f" / {stat(lambda r, n=n: r.train_violation_rate(n, last=None), 4)}" for n in names]
        row += [stat(lambda r, n=n: r.episode_cost[n], 2) for n in names]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


SMOOTH = 10
"""Iterations of the moving average applied to the training curves of the figure."""


def _band(ax, runs: list[list[float]], label: str) -> None:
    """Mean over seeds of a training curve (moving average over `SMOOTH` iterations), min-max over seeds shaded."""
    length = min(len(r) for r in runs)
    window = max(1, min(SMOOTH, length))
    curves = np.array([np.convolve(r[:length], np.ones(window) / window, mode="valid") for r in runs])
    x = np.arange(curves.shape[1]) + window
    (line,) = ax.plot(x, curves.mean(axis=0), label=f"{label} (n={len(runs)})", lw=1.2)
    if len(runs) > 1:
        ax.fill_between(x, curves.min(axis=0), curves.max(axis=0), color=line.get_color(), alpha=0.2)


def plot(results: list[VariantResult], path: Path) -> None:
    """Curricula over training (first seed of each curriculum variant), and per variant and arm the arm and speed
    tracking, episode length and each cost's violation rate over training: mean over seeds, min-max shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    costs = list(results[0].violation_rate)
    fig, axes = plt.subplots(3, 3, figsize=(16, 12))
    ax_ws, ax_bal, ax_lim, ax_arm, ax_speed, ax_len, *ax_viol = axes.flatten()
    groups: dict[str, list[VariantResult]] = {}
    for r in results:
        groups.setdefault(f"{r.display_name} ({r.arm})", []).append(r)
    for label, runs in groups.items():
        h = runs[0].history
        if "Curriculum/arm_workspace/progress" in h:
            ax_ws.plot(h["Curriculum/arm_workspace/progress"], label=f"{label}: workspace progress")
            ax_ws.plot(h["Curriculum/arm_workspace/score"], "--", label=f"{label}: arm tracking score")
            ax_bal.plot(h["Curriculum/reward_balance/scale_base"], label=f"{label}: base")
            ax_bal.plot(h["Curriculum/reward_balance/scale_arm"], "--", label=f"{label}: arm")
            for key, values in h.items():
                if key.endswith("/limit"):
                    ax_lim.plot(values, label=f"{label}: {key.split('/')[1]}")
        for ax, key in ((ax_arm, "Episode_Reward/ee_track"), (ax_speed, "Episode_Reward/track_lin_vel_x"),
                        (ax_len, "Train/mean_episode_length"),
                        *((ax, f"Cost/{cost}/violation_rate") for ax, cost in zip(ax_viol, costs))):
            if all(key in r.history for r in runs):
                _band(ax, [r.history[key] for r in runs], label)
    titles = [(ax_ws, "arm-constrained target curriculum (first seed)"), (ax_bal, "reward-aware weight scales (first seed)"),
              (ax_lim, "cost limits (allowed violation rate)"), (ax_arm, "arm tracking reward (ee_track, per s)"),
              (ax_speed, "base speed tracking reward (track_lin_vel_x, per s)"), (ax_len, "mean episode length [steps]")]
    titles += [(ax, f"{cost} violation rate while training (stochastic policy)") for ax, cost in zip(ax_viol, costs)]
    for ax, title in titles:
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("iteration")
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    for ax in ax_viol[len(costs):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-envs", type=int, default=512)
    parser.add_argument("--iterations", type=int, default=150)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--arms", nargs="+", default=None, choices=list(ARM_TASKS),
                        help="arm actions to train (default: joint_position); with --from-json, the ones to show (all)")
    parser.add_argument("--eval-episodes", type=int, default=256)
    parser.add_argument("--out", type=Path, default=Path("bench_results/loco_manip"))
    parser.add_argument("--from-json", type=Path, nargs="+", default=None,
                        help="print the table and draw the figure of one or more results.json (merged)")
    parser.add_argument("--override", nargs="+", default=[], metavar="KEY=VALUE",
                        help="task overrides for every run, trained and tested with (e.g. env.actions.arm.scale=0.5)")
    parser.add_argument("--label", default="", help="names the --override setting in the table and for --resume")
    parser.add_argument("--resume", action="store_true",
                        help="keep the runs already in OUT/results.json and train only the missing ones")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.from_json is not None:
        results = [VariantResult(**r) for path in args.from_json for r in json.loads(path.read_text())]
        results = [r for r in results if args.arms is None or r.arm in args.arms]
        print(table(results))
        plot(results, args.out / "curricula.png")
        return
    args.arms = args.arms or ["joint_position"]
    results_path = args.out / "results.json"
    results = [VariantResult(**r) for r in json.loads(results_path.read_text())] if args.resume and results_path.exists() else []
    done = {r.key for r in results}
    steps = args.num_envs * make_agent_cfg(ARM_TASKS["joint_position"]).num_steps_per_env * args.iterations
    print(f"[loco_manip] {len(args.variants)} variants x seeds {args.seeds}: {args.num_envs} envs x {args.iterations} "
          f"iterations = {steps / 1e6:.2f}M env steps each; test: {args.eval_episodes} episodes of the final task")
    for seed in args.seeds:
        for name, arm in [(n, a) for n in args.variants for a in args.arms]:
            if (name, arm, seed, args.label, steps) in done:
                print(f"[loco_manip] {name} ({arm} arm) seed {seed}: in {results_path}, kept")
                continue
            task = ARM_TASKS[arm]
            policy, history, seconds = train(name, task, seed, args.num_envs, args.iterations, args.out / "logs",
                                             args.override)
            scores = test(policy, task, seed, args.eval_episodes, args.override)
            results.append(VariantResult(name, seed, train_time_s=seconds, history=history, arm=arm, label=args.label,
                                         overrides=list(args.override), env_steps=steps, **scores))
            print(f"[loco_manip] {name} ({arm} arm) seed {seed}: trained in {seconds:.0f} s; ee error {scores['ee_error']:.3f} m, "
                  f"(settled {scores['settled_ee_error']:.3f}, stowed arm {scores['stowed_ee_error']:.3f}; "
                  f"orientation {scores['settled_orient_error']:.3f} rad), "
                  f"speed error {scores['speed_error']:.3f} m/s (settled {scores['settled_speed_error']:.3f}), survival {scores['survival']:.3f}, "
                  f"violations {', '.join(f'{k} {v:.4f}' for k, v in scores['violation_rate'].items())}", flush=True)
            atomic_write_text(results_path, json.dumps([vars(r) for r in results], indent=1))
    print(table(results))
    plot(results, args.out / "curricula.png")
    print(f"[loco_manip] results: {args.out / 'results.json'}, figure: {args.out / 'curricula.png'}")


if __name__ == "__main__":
    main()
