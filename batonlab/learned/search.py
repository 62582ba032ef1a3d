# SPDX-License-Identifier: BSD-3-Clause
"""Reward search in the manner of Eureka: an LLM writes reward functions, short trainings judge them,
per-component statistics and success go back to the LLM (reward reflection), for a few rounds.

Each round asks for `samples` functions (different seeds); the ones that pass the sandbox on a
sample batch are trained in parallel as Ray tasks, each in its own run folder with its checkpoint.
The best trial of all rounds (highest evaluated success rate, then highest training success) is
kept; the next round's prompt holds its code and the statistics of every trial of the round. The
trainer itself is passed in (`trial_fn`), so this module knows nothing of tasks.

Ray: `address=None` starts a local Ray for the search and shuts it down after; an address
("ray://host:10001" or "auto") joins a running cluster, whose workers must have batonlab installed.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from batonlab.learned.features import FieldSpec
from batonlab.learned.llm_progress import REWARD_SYSTEM, reward_prompt, write_function


@dataclass
class TrialSpec:
    """One training of one generated reward function (sent to a Ray worker)."""

    iteration: int
    sample: int
    source_path: str
    run_dir: str
    seed: int


@dataclass
class TrialResult:
    """One sampled reward function's outcome: status, training and evaluation success, statistics."""
    iteration: int
    sample: int
    status: str
    """"trained", "rejected" (the code never passed the sandbox) or "failed" (training raised)."""
    source_path: str | None = None
    run_dir: str | None = None
    success: float = 0.0
    """Success rate of the evaluation episodes after training."""
    train_success: list[float] = field(default_factory=list)
    """Success rate of each training iteration."""
    components: dict[str, dict[str, float]] = field(default_factory=dict)
    """{component: {"mean", "std", "first", "last"}} per env step: the reflection's statistics."""
    error: str | None = None
    checkpoint: str | None = None
    env_steps: int = 0

    @property
    def score(self) -> tuple[float, float]:
        """Sort key: (evaluation success, last training iteration's success)."""
        return (self.success, self.train_success[-1] if self.train_success else 0.0)


@dataclass
class SearchCfg:
    """Settings of the LLM reward search: rounds, samples per round, retries, seed and Ray resources."""
    iterations: int = 2
    """Rounds of sampling, training and reflection."""
    samples: int = 2
    """Reward functions sampled per round."""
    attempts: int = 2
    """Answers per sample when the code fails the sandbox (the error is sent back)."""
    seed: int = 0
    ray_address: str | None = None
    """None: a local Ray; otherwise the cluster's address."""
    num_cpus: int | None = None
    """CPUs of the local Ray (default: all)."""
    cpus_per_trial: float = 1.0


def reflection(best: TrialResult, best_source: str, round_results: list[TrialResult]) -> str:
    """The feedback message of Eureka's reward reflection: the best code and what every trial of the round did."""
    lines = [f"The best reward function so far reached an evaluated success rate of {best.success:.2f}:",
             f"```python\n{best_source}```", "Results of the last round:"]
    for r in round_results:
        if r.status != "trained":
            lines.append(f"- sample {r.sample}: {r.status}: {r.error}")
            continue
        curve = ", ".join(f"{s:.2f}" for s in r.train_success[:: max(1, len(r.train_success) // 6)])
        lines.append(f"- sample {r.sample}: success {r.success:.2f}; training success over iterations: [{curve}]")
        for name, stats in r.components.items():
            lines.append(f"    {name}: mean {stats['mean']:.3g}, std {stats['std']:.3g}, first {stats['first']:.3g}, "
                         f"last {stats['last']:.3g}")
    lines.append("Analyse which components helped, which did not change or dominated, and write an improved reward "
                 "function (rescale, rewrite or drop components).")
    return "\n".join(lines)


def run_search(cfg: SearchCfg, client, task_description: str, task_source: str, fields: list[FieldSpec],
               sample_obs: dict[str, torch.Tensor], trial_fn: Callable[[TrialSpec], TrialResult],
               out_dir: str | Path, log: Callable[[str], None] = print) -> list[TrialResult]:
    """Run the search; writes `out_dir/results.json`, `report.md` and `search.png`; returns every trial."""
    import ray

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    started_here = not ray.is_initialized()
    if started_here:
        os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # no GPU juggling for CPU trials (and no warning)
        ray.init(address=cfg.ray_address, num_cpus=cfg.num_cpus if cfg.ray_address is None else None,
                 include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    remote_trial = ray.remote(num_cpus=cfg.cpus_per_trial)(_run_trial)
    prompt = reward_prompt(task_description, fields, task_source)
    results: list[TrialResult] = []
    best: TrialResult | None = None
    try:
        for iteration in range(cfg.iterations):
            start = time.perf_counter()
            pending, round_results = [], []
            for sample in range(cfg.samples):
                seed = cfg.seed * 10_000 + iteration * 100 + sample
                written = write_function(client, REWARD_SYSTEM, prompt, "reward", "components", sample_obs,
                                         attempts=cfg.attempts, seed=seed)
                trial_dir = out_dir / f"iter{iteration:02d}" / f"sample{sample:02d}"
                trial_dir.mkdir(parents=True, exist_ok=True)
                if written.source is None:
                    (trial_dir / "rejected.txt").write_text("\n\n".join(written.errors))
                    round_results.append(TrialResult(iteration, sample, "rejected", error=written.errors[-1] if written.errors else None))
                    continue
                source_path = trial_dir / "reward.py"
                source_path.write_text(written.source)
                spec = TrialSpec(iteration, sample, str(source_path), str(trial_dir), seed)
                pending.append(remote_trial.remote(trial_fn, spec))
            round_results += ray.get(pending)
            round_results.sort(key=lambda r: r.sample)
            results += round_results
            trained = [r for r in results if r.status == "trained"]
            if trained:
                best = max(trained, key=lambda r: r.score)
            log(f"[batonlab] reward search round {iteration + 1}/{cfg.iterations} ({time.perf_counter() - start:.0f} s): "
                + ", ".join(f"sample {r.sample} {r.status}" + (f" success {r.success:.2f}" if r.status == "trained" else "")
                            for r in round_results)
                + (f"; best so far: iter {best.iteration} sample {best.sample} success {best.success:.2f}" if best else ""))
            if best is not None and iteration + 1 < cfg.iterations:
                feedback = reflection(best, Path(best.source_path).read_text(), round_results)
                prompt = reward_prompt(task_description, fields, task_source) + "\n\n" + feedback
            write_report(results, best, out_dir)
    finally:
        if started_here:
            ray.shutdown()
    return results


def _run_trial(trial_fn: Callable[[TrialSpec], TrialResult], spec: TrialSpec) -> TrialResult:
    """The Ray task: the trainer travels as an argument (any picklable callable)."""
    return trial_fn(spec)


def write_report(results: list[TrialResult], best: TrialResult | None, out_dir: Path) -> None:
    """results.json, report.md (a table per round) and search.png (success of every trial per round, best so far)."""
    (out_dir / "results.json").write_text(json.dumps(
        {"best": asdict(best) if best else None, "trials": [asdict(r) for r in results]}, indent=1))
    lines = ["# Reward search", ""]
    if best:
        lines += [f"Best: round {best.iteration}, sample {best.sample}, success {best.success:.2f} "
                  f"(`{best.source_path}`, checkpoint `{best.checkpoint}`)", ""]
    for iteration in sorted({r.iteration for r in results}):
        lines += [f"## Round {iteration}", "", "| sample | status | success | final training success | components | run |",
                  "|---|---|---|---|---|---|"]
        for r in (r for r in results if r.iteration == iteration):
            comps = ", ".join(f"{k} {v['mean']:.3g}" for k, v in r.components.items())
            final = f"{r.train_success[-1]:.2f}" if r.train_success else "–"
            status = r.status if r.status == "trained" else f"{r.status}: {(r.error or '')[:80]}"
            lines.append(f"| {r.sample} | {status} | {r.success:.2f} | {final} | {comps} | {r.run_dir or '–'} |")
        lines.append("")
    lines.append("![search](search.png)")
    (out_dir / "report.md").write_text("\n".join(lines) + "\n")
    _plot(results, out_dir / "search.png")


def _plot(results: list[TrialResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.2))
    rounds = sorted({r.iteration for r in results})
    for r in results:
        ax.scatter(r.iteration, r.success, color="tab:blue" if r.status == "trained" else "tab:red", s=18, zorder=3)
    best, curve = 0.0, []
    for i in rounds:
        best = max([best] + [r.success for r in results if r.iteration == i and r.status == "trained"])
        curve.append(best)
    ax.plot(rounds, curve, color="black", label="best so far")
    ax.set_xlabel("round")
    ax.set_ylabel("evaluated success rate")
    ax.set_xticks(rounds)
    ax.set_ylim(-0.05, 1.05)
    ax.legend(loc="lower right")
    ax.set_title("reward search (red: rejected or failed)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
