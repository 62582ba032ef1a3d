# SPDX-License-Identifier: BSD-3-Clause
"""The wheel-legged robot's own tasks: success at λ = 0 of the scripted expert and of an upper policy cloned from it,
over the scripted lower level and over a trained whole-body policy, and of a flat policy distilled from both levels,
per seed.

    python bench/wl_tasks.py [--tasks wl_door wl_baton wl_chase] [--seeds 0 1 2] [--num-envs 256] [--iterations 60]
                             [--episodes 64] [--dagger-iterations 0] [--lower-export RUN/exported] [--flat]
                             [--finetune-iterations 0] [--out bench_results/wl_tasks] [--resume] [--no-students]

Per task and seed, each on `--episodes` play episodes (one per env, seed 10 000 + seed):
- `expert / scripted`: the task's scripted expert over the scripted lower level (`<task>_scripted`);
- `expert / trained`: the same expert over the frozen whole-body policy in `--lower-export` (`<task>`), if given;
- `BC / scripted`: a student cloned from the expert (Distillation with the expert acting at every step, β = 1: its
  demonstrations, labelled) for `--iterations` on `--num-envs` envs over the scripted level (or with
  `--upper-over trained` over the trained one: `BC, learned over trained`), then tested alone;
- `BC / trained`: that student over the trained whole-body policy, if `--lower-export` is given;
- with `--dagger-iterations N`, `DAgger` instead of `BC`: β falls from 1 to 0 over the first N iterations, so that
  the student learns on its own states too;
- with `--flat` (and `--lower-export`): `expert / flat`, the expert over the trained whole-body policy read out as
  joint actions (`<task>_flat`'s teacher), and `BC` or `DAgger / flat`, one flat policy (joints from what the robot
  senses) distilled from it with the same budget, tested alone;
- with `--finetune-iterations N` (and `--lower-export`): `<student> + PPO / trained`, the student cloned over the
  scripted level fine-tuned with PPO at λ = 0 over the trained whole-body policy for N iterations on `--num-envs`
  envs (`finetune=`; its budget adds the fine-tune's to the cloning's), keeping the checkpoint of the best of its play
  evaluations every `--finetune-eval-interval` iterations (`keep_best=true`, `--episodes` episodes at the run's seed,
  not the test's) and testing that one (0: the last iteration's).
Success is the task's success term at the episode's end. `results.json` keeps every number (written after each run);
`--resume` runs only what it lacks.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from batonlab.cli import train as cli_train
from batonlab.cli.common import build_invocation
from batonlab.cli.policy_loading import load_trained
from batonlab.env.env import BatonEnv
from batonlab.env.terms import build_term
from batonlab.rl.evaluate import evaluate
from batonlab.utils.files import atomic_write_text

TASKS = ("wl_door", "wl_baton", "wl_chase")
"""The robot's tasks that exist (each with a `<task>_scripted` variant and a scripted expert)."""


@dataclass
class Result:
    """One policy's test on one seed."""

    task: str
    policy: str
    """`expert`, `BC`, `DAgger` (`, learned over trained`) or `<BC or DAgger> + PPO`."""
    lower: str
    """`scripted`, `trained` (the whole-body policy of `--lower-export`) or `flat` (no lower level: one policy)."""
    seed: int
    success: float
    survival: float
    train_s: float = 0.0
    env_steps: int = 0
    run_dir: str = ""
    """The student's run folder, or for a fine-tune the checkpoint tested ("" for the expert)."""

    @property
    def key(self) -> tuple:
        return self.task, self.policy, self.lower, self.seed, self.env_steps


def task_args(task: str, lower: str, export: str | None) -> list[str]:
    """The `task=` and lower-level overrides of `task` over the `scripted` or `trained` (`export`) lower level, or
    `flat` (its teacher over `export`)."""
    if lower == "scripted":
        return [f"task={task}_scripted"]
    if lower == "flat":
        return [f"task={task}_flat", f"env.expert.params.layer.params.export={export}"]
    return [f"task={task}", f"env.actions.commands.params.export={export}"]


def test(task: str, lower: str, export: str | None, seed: int, episodes: int, student=None) -> tuple[float, float]:
    """(success rate, survival) of `student` (an inference policy), or of the task's expert if None."""
    cfg = build_invocation(task_args(task, lower, export), play=True).task
    cfg.num_envs, cfg.seed = episodes, 10_000 + seed
    env = BatonEnv(cfg)
    if student is None:
        expert = build_term(cfg.expert.func, cfg.expert.params, env, "expert")
        policy = lambda obs: expert(env)  # noqa: E731 (the expert reads the env's exact state)
    else:
        policy = student
    result = evaluate(env, policy, progress=False)
    env.close()
    return result.success_rate, 1.0 - float(result.terminated.mean())


def clone(task: str, seed: int, num_envs: int, iterations: int, dagger_iterations: int, log_root: Path,
          lower: str = "scripted", export: str | None = None):
    """Train a student on the expert's demonstrations (β = 1, or falling to 0 over `dagger_iterations`): an upper level
    over the `scripted` or `trained` (`export`) level, or a `flat` policy (its teacher over `export`); (inference
    policy, seconds, steps, run folder)."""
    inv = build_invocation([*task_args(task, lower, export), f"seed={seed}", f"env.num_envs={num_envs}",
                            f"max_iterations={iterations}", "agent.algorithm.class_name=Distillation", "teacher=expert",
                            "agent.algorithm.distillation.teacher_action_prob=1.0",
                            f"agent.algorithm.distillation.teacher_action_iterations={dagger_iterations}",
                            f"log_root={log_root}",
                            "eval_episodes=0", "progress=false"])
    result = cli_train.train(inv)
    if result.interrupted or result.iterations != iterations:
        raise SystemExit(f"[wl_tasks] {task} seed {seed}: stopped after {result.iterations} of {iterations} "
                         f"iterations ({result.run_dir}); not recorded")
    return result.policy, result.wall_s, result.env_steps, str(result.run_dir)


def finetune(task: str, student_run: str, seed: int, num_envs: int, iterations: int, log_root: Path, export: str,
             eval_interval: int, eval_episodes: int):
    """PPO at λ = 0 over the trained level (`export`) from the upper level cloned in `student_run`, keeping its best
    checkpoint if `eval_interval` > 0; (inference policy of that or the last checkpoint, seconds, steps, checkpoint)."""
    best = ["keep_best=true", f"eval_interval={eval_interval}", f"eval_episodes={eval_episodes}"] if eval_interval \
        else ["eval_episodes=0"]
    inv = build_invocation([*task_args(task, "trained", export), f"finetune={student_run}",
                            "agent.algorithm.class_name=PPO", f"seed={seed}", f"env.num_envs={num_envs}",
                            f"max_iterations={iterations}", f"log_root={log_root}", *best, "progress=false"])
    result = cli_train.train(inv)
    if result.interrupted or result.iterations != iterations:
        raise SystemExit(f"[wl_tasks] {task} seed {seed}: the fine-tune stopped after {result.iterations} of "
                         f"{iterations} iterations ({result.run_dir}); not recorded")
    if result.best is None:
        return result.policy, result.wall_s, result.env_steps, str(result.checkpoint)
    print(f"[wl_tasks] {task} seed {seed}: the fine-tune's best evaluation: iteration {result.best.iteration}, "
          f"success {result.best.success_rate:.3f}", flush=True)
    env, runner, _, _ = load_trained(build_invocation([f"run_dir={result.run_dir}", f"checkpoint={result.best.path}",
                                                       "env.num_envs=1"], play=True))
    env.close()
    return runner.inference_policy(), result.wall_s, result.env_steps, str(result.best.path)


def table(results: list[Result]) -> str:
    """Markdown: success and survival per task, policy and lower level, mean ± std over seeds."""
    rows = ["| task | policy | lower level (flat: one policy) | seeds | success | survival | student budget |",
            "|---|---|---|---|---|---|---|"]
    groups: dict[tuple, list[Result]] = {}
    for r in results:
        groups.setdefault((r.task, r.policy, r.lower), []).append(r)
    for (task, policy, lower), rs in groups.items():
        success, survival = np.array([r.success for r in rs]), np.array([r.survival for r in rs])
        budget = "-" if policy == "expert" else f"{rs[0].env_steps / 1e6:.2f}M steps, {np.mean([r.train_s for r in rs]):.0f} s"
        rows.append(f"| {task} | {policy} | {lower} | {sorted(r.seed for r in rs)} | {success.mean():.3f} ± "
                    f"{success.std():.3f} | {survival.mean():.3f} | {budget} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), choices=TASKS)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--num-envs", type=int, default=256)
    parser.add_argument("--iterations", type=int, default=60)
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--dagger-iterations", type=int, default=0, help="β falls to 0 over these (0: BC, β = 1)")
    parser.add_argument("--no-students", action="store_true", help="test the experts only")
    parser.add_argument("--lower-export", default=None, help="a whole-body policy's export folder (wl_loco_manip_pose)")
    parser.add_argument("--flat", action="store_true", help="also the flat policy (needs --lower-export)")
    parser.add_argument("--upper-over", choices=("scripted", "trained"), default="scripted",
                        help="the lower level the upper level learns over (trained: needs --lower-export)")
    parser.add_argument("--finetune-iterations", type=int, default=0,
                        help="PPO over the trained level from the upper level cloned over the scripted one (needs "
                             "--lower-export)")
    parser.add_argument("--finetune-eval-interval", type=int, default=20,
                        help="test the fine-tune's best play evaluation, one every N iterations (0: the last "
                             "iteration's checkpoint)")
    parser.add_argument("--out", type=Path, default=Path("bench_results/wl_tasks"))
    parser.add_argument("--resume", action="store_true", help="keep the results in OUT/results.json, run the rest")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "results.json"
    results = [Result(**r) for r in json.loads(path.read_text())] if args.resume and path.exists() else []
    if (args.flat or args.upper_over == "trained" or args.finetune_iterations) and not args.lower_export:
        parser.error("--flat, --upper-over trained and --finetune-iterations learn over the trained whole-body policy: "
                     "give --lower-export")
    if args.finetune_iterations and (args.upper_over != "scripted" or args.no_students):
        parser.error("--finetune-iterations fine-tunes the upper level cloned over the scripted level: drop "
                     "--upper-over trained and --no-students")
    lowers = ["scripted"] + (["trained"] if args.lower_export else [])
    export = str(Path(args.lower_export).resolve()) if args.lower_export else None

    def record(result: Result) -> None:
        results.append(result)
        print(f"[wl_tasks] {result.task} seed {result.seed}: {result.policy} over the {result.lower} level: success "
              f"{result.success:.3f}, survival {result.survival:.3f}", flush=True)
        atomic_write_text(path, json.dumps([vars(r) for r in results], indent=1))

    done = {r.key[:4] for r in results}
    student_name = "DAgger" if args.dagger_iterations else "BC"
    for task in args.tasks:
        for seed in args.seeds:
            for lower in lowers + (["flat"] if args.flat else []):
                if (task, "expert", lower, seed) not in done:
                    record(Result(task, "expert", lower, seed, *test(task, lower, export, seed, args.episodes)))
            if args.no_students:
                continue
            # The upper level learns over `--upper-over` and is tested over the levels it can run on; the flat policy
            # is its own.
            upper_tests = lowers if args.upper_over == "scripted" else ["trained"]
            upper_name = student_name if args.upper_over == "scripted" else f"{student_name}, learned over trained"
            for trained_over, tested_over, name in ((args.upper_over, upper_tests, upper_name),
                                                    ("flat", ["flat"] if args.flat else [], student_name)):
                missing = [lower for lower in tested_over if (task, name, lower, seed) not in done]
                if not missing:
                    continue
                torch.manual_seed(seed)
                student, seconds, steps, run = clone(task, seed, args.num_envs, args.iterations,
                                                     args.dagger_iterations, args.out / "logs", trained_over, export)
                for lower in missing:
                    scores = test(task, lower, export, seed, args.episodes, student)
                    record(Result(task, name, lower, seed, *scores, train_s=seconds, env_steps=steps, run_dir=run))
            tuned = f"{student_name} + PPO"
            if not args.finetune_iterations or (task, tuned, "trained", seed) in done:
                continue
            (cloned,) = [r for r in results if (r.task, r.policy, r.lower, r.seed) == (task, student_name, "scripted",
                                                                                      seed)]
            if not cloned.run_dir:
                raise SystemExit(f"[wl_tasks] {task} seed {seed}: {path}'s {student_name} row has no run_dir (written "
                                 "before the bench kept it): add it or run without --resume")
            torch.manual_seed(seed)
            student, seconds, steps, run = finetune(task, cloned.run_dir, seed, args.num_envs, args.finetune_iterations,
                                                    args.out / "logs", export, args.finetune_eval_interval,
                                                    args.episodes)
            scores = test(task, "trained", export, seed, args.episodes, student)
            record(Result(task, tuned, "trained", seed, *scores, train_s=cloned.train_s + seconds,
                          env_steps=cloned.env_steps + steps, run_dir=run))
    print(table(results))
    print(f"[wl_tasks] results: {path}")


if __name__ == "__main__":
    main()
