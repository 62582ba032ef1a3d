# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab train task=NAME [resume=true] [env.…=…] [agent.…=…]`, through `train`, the one training entry.

`agent.algorithm.class_name=Distillation teacher=RUN_DIR` distils a deployable student from the
teacher trained in RUN_DIR (same task); a resumed distillation takes its teacher from its checkpoint.

Scripts that train (scripts/train_wl_velocity.py) call `train` with an `Invocation` built from
their own arguments, so every run folder is made the same way.
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from batonlab.cli.common import (
    INTERRUPTED,
    USER_ERRORS,
    CliError,
    Invocation,
    check_run_robot,
    find_checkpoint,
    find_run_dir,
    new_run_dir,
    play_task_cfg,
    privileges_off,
    record_run_robot,
    student_conditions,
    seed_everything,
    stop_on_signals,
)
from batonlab.cli.finetune import resolve_finetune
from batonlab.cli.teacher import add_expert_group, resolve_teacher
from batonlab.cli.training_target import StopAt, TrainingPlan, below_bar_advice, training_plan
from batonlab.env.env import BatonEnv
from batonlab.rl import checkpoint, distributed
from batonlab.rl.distillation import restore_actor_cfg, restore_distillation_cfg
from batonlab.rl.evaluate import EvalResult, evaluate
from batonlab.rl.runner import BatonRunner, output_std
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.robots.gravity import gravity_sag
from batonlab.robots.loader import as_description
from batonlab.utils.serialize import write_yaml

@dataclass
class TrainResult:
    """What a training run did."""

    run_dir: Path
    iterations: int
    """Completed iterations in total (a resumed run counts its earlier ones)."""
    env_steps: int
    stats: dict[str, float]
    """Statistics of the last iteration (empty if none ran)."""
    wall_s: float
    """Wall time of the learning loop [s]."""
    checkpoint: Path | None
    """The last checkpoint saved (None on ranks other than 0)."""
    interrupted: bool
    """Stopped by SIGINT/SIGTERM; `checkpoint` holds the last completed iteration."""
    evaluation: EvalResult | None
    """The closing evaluation (`eval_episodes` play episodes), if it ran."""
    policy: object
    """The trained inference policy (TensorDict → actions, eval mode), for callers that test it themselves."""
    stopped_by: str = "iterations"
    """Why training ended: "stop_at" (the target was reached), "iterations" (the total, or ceiling), "signal"."""
    plan: TrainingPlan | None = None
    """The iterations and stop rule the run trained with."""
    best: BestCheckpoint | None = None
    """With `keep_best=true`: the checkpoint of the best periodic play evaluation (None if none ran)."""


def run(inv: Invocation) -> int:
    """`batonlab train`: train, evaluate and report (or print how to resume); returns the exit code."""
    result = train(inv)
    if result.interrupted:
        if result.checkpoint is not None:
            again = [f"task={inv.task_name}", *([f"robot={inv.top.robot}"] if inv.top.robot else []),
                     *(o.input_line for o in inv.task_overrides)]
            if inv.top.max_iterations is not None:
                again.append(f"max_iterations={inv.top.max_iterations}")
            print(f"[batonlab] interrupted at iteration {result.iterations}: saved {result.checkpoint}; resume with: "
                  f"batonlab train {' '.join(again)} resume=true run_dir={result.run_dir}")
        return INTERRUPTED
    if result.evaluation is not None:
        ev = result.evaluation
        advice = below_bar_advice(inv, result.plan, ev.success_rate, result.iterations, result.run_dir)
        if advice:
            print(advice)
        print(f"[batonlab] {inv.task_name}: success rate {ev.success_rate:.2f} over {ev.num_episodes} episodes "
              f"(mean return {ev.mean_return:.3f}, play settings)")
    if result.best is not None:
        print(f"[batonlab] best play success {result.best.success_rate:.2f} at iteration {result.best.iteration}: "
              f"{result.best.path} (play or export it with checkpoint={result.best.path})")
    return 0


def train(inv: Invocation, on_iteration: Callable[[BatonRunner, dict[str, float]], None] | None = None) -> TrainResult:
    """Train `inv` as `batonlab train` does: a new run (or `resume=true`), config.yaml, checkpoints, logs.

    SIGINT and SIGTERM stop the run after the current env step with a checkpoint of the last
    completed iteration. Otherwise the policy is then evaluated with play's settings on
    `eval_episodes` episodes (at most `env.num_envs`; 0 skips it).

    Args:
        inv: Options and configs from `build_invocation`.
        on_iteration: Called after each iteration with the runner and its statistics (progress lines).
    """
    top = inv.top
    if (top.run_dir or top.checkpoint) and not top.resume:
        raise CliError("run_dir= and checkpoint= continue a run: add resume=true (a new run goes to a new folder)")
    ctx, device = None, top.device
    if top.distributed:
        try:
            ctx = distributed.context_from_environment(device)
        except RuntimeError as err:
            raise CliError(str(err)) from None
        device = ctx.device(device)
        if inv.task.sim.device.startswith("cuda"):
            inv.task.sim.device = device
        inv.task.seed += ctx.rank  # decorrelated rollouts across ranks
        distributed.init_process_group(ctx)
        print(f"[batonlab] rank {ctx.rank}/{ctx.world_size} on {device} ({ctx.backend}), seed {inv.task.seed}")
    try:
        return _train(inv, device, ctx, on_iteration)
    finally:
        distributed.shutdown()


def _train(inv: Invocation, device: str, ctx, on_iteration) -> TrainResult:
    top = inv.top
    is_main = ctx is None or ctx.is_main
    seed_everything(inv.task.seed)
    run_dir = find_run_dir(top, inv.agent.experiment_name) if top.resume else None
    if top.resume:
        check_run_robot(top, run_dir)
    ckpt = find_checkpoint(top, run_dir) if top.resume else None
    plan = training_plan(inv)
    total = plan.total_iterations
    if top.robot and is_main:
        description = as_description(top.robot)
        sag = gravity_sag(description)
        if sag is not None and sag.sags:
            print(f"[batonlab] warning: {sag.report(description.name)}", file=sys.stderr)
    distilling = inv.agent.algorithm.is_distillation
    if distilling:
        student_conditions(inv.task)
    if distilling and ckpt is not None:
        if top.teacher:
            raise CliError(f"a resumed distillation keeps the teacher of its checkpoint; drop teacher={top.teacher}")
        restore_distillation_cfg(inv.agent, checkpoint.load(ckpt))
        if inv.agent.teacher.expert:
            add_expert_group(inv)
    elif ckpt is not None:
        saved = checkpoint.load(ckpt)
        restore_actor_cfg(inv.agent, saved)
        if saved.get("finetuned_from"):
            student_conditions(inv.task, doing="fine-tuning the student")
    elif distilling:
        resolve_teacher(inv)
    finetune = resolve_finetune(inv) if top.finetune and ckpt is None else None
    if finetune is not None:
        student_conditions(inv.task, doing="fine-tuning the student")
    env = RslRlVecEnv(BatonEnv(inv.task))
    runner = BatonRunner(env, inv.agent, log_dir=run_dir, device=device, distributed=ctx, verbose=top.verbose)
    if distilling and ckpt is None and not inv.agent.teacher.expert:
        runner.load_teacher(inv.agent.teacher.checkpoint)
    if finetune is not None and ckpt is None:
        critic = runner.init_from_student(finetune.student_checkpoint, finetune.teacher_checkpoint, finetune.noise_std)
        print(f"[batonlab] fine-tuning the student of {finetune.student_checkpoint} with "
              f"{inv.agent.algorithm.class_name} (actor groups {inv.agent.obs_groups['actor']}, noise std "
              f"{output_std(runner.alg.actor).mean():.3g}); critic: "
              + (f"the teacher's ({finetune.teacher_checkpoint})" if critic else "fresh (the teacher's does not fit or is gone)"))
    if is_main and run_dir is not None:
        for stale in checkpoint.remove_stale_temporaries(run_dir):
            print(f"[batonlab] removed {stale.name}, left by a save that never finished")
    new_run = run_dir is None
    if new_run:  # a new run's folder, made once nothing can refuse it: a run that cannot start leaves none
        run_dir = new_run_dir(top, inv.agent.experiment_name, create=is_main)
        runner.log_dir = run_dir if is_main else None
    if ckpt is not None:
        runner.load(ckpt)
        if runner.iteration >= total:
            raise CliError(f"{ckpt} is at iteration {runner.iteration} already; pass max_iterations=N with N > "
                           f"{runner.iteration} to train further")
        print(f"[batonlab] resuming {run_dir} from {ckpt.name} (iteration {runner.iteration})")
    else:
        print(f"[batonlab] training {inv.task_name} in {run_dir}")
    if plan.stop_at is not None:
        source = "the task's success bar over robot=" if plan.stop_at.by_default else plan.stop_at.option
        print(f"[batonlab] training until play success >= {plan.stop_at.rate:.2f} ({source}), evaluated every "
              f"{plan.stop_at.interval} iterations, at most {total} iterations (max_iterations=N to change)")
    if plan.keep_best:
        print(f"[batonlab] keeping {BEST_CHECKPOINT}: the best of the play evaluations every {plan.eval_interval} "
              f"iterations")
    if distilling:
        groups = runner.train_cfg["obs_groups"]
        teacher = "the task's scripted expert" if inv.agent.teacher.expert else f"the teacher {inv.agent.teacher.checkpoint}"
        print(f"[batonlab] distilling a student (observation groups {groups['student']}) from {teacher} "
              f"(observation groups {groups['teacher']})")
    start = time.perf_counter()
    with stop_on_signals(runner.request_stop):
        # Written after the env is built (the config that ran), under the signal guard: a Ctrl-C here
        # lets it finish and stops with a checkpoint, so the run folder plays and resumes.
        if is_main:
            # The run keeps a copy of its robot's files and names it relative to itself: the folder can move.
            robot = record_run_robot(top, run_dir)
            cli = dataclasses.replace(top, robot=robot["robot"]) if robot else top
            config = {"task_name": inv.task_name, "cli": cli}
            if robot:
                config["robot_sha256"] = robot["robot_sha256"]
            write_yaml({**config, "env": inv.task, "agent": inv.agent}, run_dir / "config.yaml")
        target = _PeriodicEval(inv, plan, run_dir if is_main else None) if plan.evaluates else None
        try:
            stats = runner.learn(total, progress=top.progress, on_iteration=on_iteration, should_stop=target)
        except USER_ERRORS:
            # A learned reward failing in the first iteration (a progress function that loops): nothing trained,
            # so the new run's folder goes too.
            env.close()
            if new_run and is_main and runner.last_checkpoint is None:
                shutil.rmtree(run_dir, ignore_errors=True)
            raise
    wall_s = time.perf_counter() - start
    env.close()
    evaluation = target.reached if target is not None else None
    stopped_by = "signal" if runner.stop_requested else ("stop_at" if evaluation is not None else "iterations")
    if not runner.stop_requested:
        summary = ", ".join(f"{k}={stats[k]:.3f}" for k in ("Train/mean_return", "Episode/success_rate") if k in stats)
        print(f"[batonlab] done: {runner.iteration} iterations, {runner.total_env_steps} env steps; "
              f"{_why_stopped(plan, evaluation, runner.iteration)}; "
              f"{summary or 'no training episode ended in the last iteration'}")
        if is_main:
            print(f"[batonlab] checkpoints and TensorBoard logs: {run_dir}")
        if is_main and top.eval_episodes > 0 and evaluation is None:
            # No more envs than training ran: a small test run gets a small evaluation.
            evaluation = _evaluate(inv, runner, min(top.eval_episodes, inv.task.num_envs))
            if plan.keep_best and runner.last_checkpoint is not None:  # the last iteration's evaluation is this one
                target.keep_if_best(checkpoint.load(runner.last_checkpoint), evaluation, run_dir)
    return TrainResult(run_dir, runner.iteration, runner.total_env_steps, stats, wall_s, runner.last_checkpoint,
                       runner.stop_requested, evaluation, runner.inference_policy(), stopped_by, plan,
                       target.best if target is not None else None)


@dataclass(frozen=True)
class BestCheckpoint:
    """`model_best.pt` of a `keep_best=true` run: the checkpoint of its best periodic play evaluation."""

    path: Path
    iteration: int
    success_rate: float
    """Play success rate of that evaluation [0, 1]."""


BEST_CHECKPOINT = "model_best.pt"
"""File name of `keep_best`'s checkpoint in a run folder (never picked as the newest: not `model_<it>.pt`)."""


class _PeriodicEval:
    """`BatonRunner.learn`'s `should_stop` for `stop_at` and `keep_best`: a play evaluation every `eval_interval`
    iterations, a stop at the target, and `model_best.pt` at each evaluation that beats the best so far."""

    def __init__(self, inv: Invocation, plan: TrainingPlan, run_dir: Path | None):
        self.inv, self.plan = inv, plan
        self.reached: EvalResult | None = None
        """The evaluation that reached the target (the closing evaluation of the run), if one did."""
        self.best = _saved_best(run_dir / BEST_CHECKPOINT) if plan.keep_best and run_dir is not None else None
        """The best checkpoint so far (a resumed run starts from the one it saved)."""

    def __call__(self, runner: BatonRunner, stats: dict[str, float]) -> bool:
        if runner.iteration % self.plan.eval_interval:
            return False
        # The closing evaluation's settings: the same seed and envs, so a policy that stops here would
        # score the same there.
        evaluation = _evaluate(self.inv, runner, min(self.inv.top.eval_episodes, self.inv.task.num_envs),
                               progress=False)
        runner.alg.train_mode()
        notes = []
        if self.plan.stop_at is not None:
            notes.append(f"stopping at {self.plan.stop_at.rate:.2f}")
        if self.plan.keep_best and runner.log_dir is not None:
            notes.append(self.keep_if_best(runner.state_dict(), evaluation, runner.log_dir))
        tqdm.write(f"[batonlab] iteration {runner.iteration}: play success {evaluation.success_rate:.2f}"
                   + (f" ({'; '.join(notes)})" if notes else ""))
        if self.plan.stop_at is not None and evaluation.success_rate >= self.plan.stop_at.rate:
            self.reached = evaluation
        return self.reached is not None

    def keep_if_best(self, state: dict, evaluation: EvalResult, run_dir: Path) -> str:
        """Save `state` (a checkpoint dict) as `model_best.pt` if `evaluation` beats the best so far; says which."""
        if self.best is not None and evaluation.success_rate <= self.best.success_rate:
            return f"best {self.best.success_rate:.2f} at iteration {self.best.iteration}"
        played = {"success_rate": evaluation.success_rate, "num_episodes": evaluation.num_episodes}
        path = checkpoint.save_atomic({**state, "play_evaluation": played}, run_dir / BEST_CHECKPOINT)
        self.best = BestCheckpoint(path, int(state["iter"]), evaluation.success_rate)
        return f"best so far: saved {BEST_CHECKPOINT}"


def _saved_best(path: Path) -> BestCheckpoint | None:
    """The `model_best.pt` a run saved before it was resumed, if it loads."""
    try:
        state = checkpoint.load(path)
    except (FileNotFoundError, checkpoint.CheckpointError):
        return None
    evaluation = state.get("play_evaluation", {})
    return BestCheckpoint(path, int(state.get("iter", 0)), float(evaluation.get("success_rate", -1.0)))


def _why_stopped(plan: TrainingPlan, reached: EvalResult | None, iterations: int) -> str:
    if reached is not None:
        return f"stopped: play success {reached.success_rate:.2f} reached {plan.stop_at.option}"
    if plan.stop_at is not None:
        return (f"stopped at the ceiling of {plan.total_iterations} iterations before play success reached "
                f"{plan.stop_at.rate:.2f}")
    return f"stopped after the {plan.total_iterations} iterations asked for"


def _evaluate(inv: Invocation, runner: BatonRunner, num_episodes: int, progress: bool | None = None) -> EvalResult:
    """One episode per env of the task's play variant, as `batonlab play` runs it (without the video)."""
    cfg = play_task_cfg(inv)
    cfg.num_envs = num_episodes
    env = BatonEnv(cfg)
    privileges_off(env)
    try:
        return evaluate(env, runner.inference_policy(), progress=inv.top.progress if progress is None else progress)
    finally:
        env.close()
