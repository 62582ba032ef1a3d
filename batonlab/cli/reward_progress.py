# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab reward fit-progress [key=value ...]`: train the time-contrastive frame encoder of progress rewards.

    batonlab reward fit-progress tasks=[arm_reach,arm_lift] episodes=16
    batonlab reward fit-progress tasks=[arm_reach,arm_lift] policy=logs/arm_reach/2026-01-01_12-00-00 demo_out=demo.npz

Each task contributes `episodes` rendered episodes of random actions (a low-pass filtered walk);
`policy=RUN_DIR` adds `policy_episodes` episodes of that run's policy on its own task (λ =
`privilege_level`, default 0 as in `play`), rendered densely and trained as one time-aligned group
(its k-th frames show the same moment of the task: this is what aligns the embedding across
episodes; a task whose view shows only progress, `SceneCfg.progress_align_episodes = False`, has them
trained each alone), and `demo_out=` writes its first one as a demonstration for
`batonlab.rewards.progress.ProgressReward` (cut it where the task is done: a demo runs from start to
success). No task labels reach the encoder: it learns from time alone.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from batonlab.cli.common import CliError, seed_everything
from batonlab.cli.learned_common import option, parse_subcommand


@dataclass
class ProgressOptions:
    """The `key=value` options of `batonlab reward fit-progress`."""
    tasks: list[str] = field(default_factory=lambda: ["arm_reach", "arm_lift"],
                             metadata={"help": "tasks whose rollouts train the encoder, e.g. [arm_reach,arm_lift]"})
    episodes: int = option(16, "episodes of random actions per task")
    frame_every: int = option(4, "control steps between two rendered frames of random episodes")
    policy: str | None = option(None, "RUN_DIR of a trained policy of one of the tasks: adds its episodes, time-aligned")
    policy_episodes: int = option(48, "episodes of the policy")
    policy_steps: int | None = option(None, "control steps of each policy episode (default: the whole episode)")
    policy_frame_every: int = option(1, "control steps between two rendered frames of policy episodes")
    privilege_level: float = option(0.0, "λ while the policy acts (a teacher trained at λ = 1 needs 1)")
    demo_out: str | None = option(None, "write the policy's first episode as a demo .npz here (needs policy=)")
    out: str = option("logs/progress_encoder/encoder.pt", "encoder file")
    size: int = option(64, "frame size [pixels]")
    num_envs: int = option(16, "envs rendered side by side")
    steps: int = option(1500, "gradient steps of the time-contrastive training")
    embedding_dim: int = option(32, "embedding size")
    seed: int = option(0, "seed of rollouts and training")


def run(args: list[str]) -> int:
    """`batonlab reward fit-progress`: train and save a progress encoder; returns the exit code."""
    options = parse_subcommand(args, ProgressOptions(), "fit-progress", __doc__)
    if options is None:
        return 0
    _check(options)
    out, num_frames = fit(options)
    print(f"[batonlab] progress encoder: {num_frames} frames of {options.tasks}; wrote {out}")
    return 0


def fit(options: ProgressOptions) -> tuple[Path, int]:
    """Render the rollouts, train the encoder, write its file (and the demo); returns (file, frames)."""
    from batonlab.learned.frames import collect_rollouts
    from batonlab.learned.progress_encoder import EncoderCfg, TrainCfg, save_encoder, train_encoder
    from batonlab.learned.progress_matcher import save_demo

    seed_everything(options.seed)
    episodes, groups = [], []
    for task in options.tasks:
        env = _random_env(task, options)
        try:
            episodes += list(collect_rollouts(env, task, options.episodes, frame_every=options.frame_every,
                                              size=options.size).frames)
        finally:
            env.close()
    groups += [None] * len(episodes)
    if options.policy:
        env, policy, task = _policy_env(options)
        try:
            rollouts = collect_rollouts(env, task, options.policy_episodes, num_steps=options.policy_steps,
                                        frame_every=options.policy_frame_every, policy=policy, size=options.size)
        finally:
            env.close()
        episodes += list(rollouts.frames)
        # One policy from resets: its episodes are time-aligned, unless the task's view shows only progress.
        groups += [0 if env.cfg.scene.progress_align_episodes else None] * rollouts.num_episodes
        if options.demo_out:
            print(f"[batonlab] demo: wrote {save_demo(options.demo_out, rollouts.frames[0], fps=1.0 / (env.step_dt * options.policy_frame_every))}",
                  file=sys.stderr)
    train_cfg = TrainCfg(steps=options.steps, seed=options.seed)
    encoder = train_encoder(episodes, EncoderCfg(image_size=options.size, embedding_dim=options.embedding_dim), train_cfg,
                            aligned_groups=groups)
    num_frames = sum(len(e) for e in episodes)
    return save_encoder(options.out, encoder, options.tasks, num_frames, train_cfg), num_frames


# Private functions.


def _check(options: ProgressOptions) -> None:
    from batonlab.tasks import list_tasks

    valid = [t.name for t in list_tasks()]
    unknown = [t for t in options.tasks if t not in valid]
    if not options.tasks or unknown:
        raise CliError(f"tasks={options.tasks}: " + (f"unknown {unknown}; " if unknown else "none given; ") + f"valid: {valid}")
    for key in ("episodes", "frame_every", "policy_episodes", "policy_frame_every", "num_envs", "steps", "embedding_dim"):
        if getattr(options, key) < 1:
            raise CliError(f"{key}={getattr(options, key)}: expected an integer >= 1")
    if options.size < 16 or options.size % 16:
        raise CliError(f"size={options.size}: expected a multiple of 16 (the encoder halves the image 4 times)")
    if options.demo_out and not options.policy:
        raise CliError("demo_out= writes an episode of the policy: pass policy=RUN_DIR too")
    if options.policy and not Path(options.policy).is_dir():
        raise CliError(f"policy={options.policy}: no such run folder")
    if not 0.0 <= options.privilege_level <= 1.0:
        raise CliError(f"privilege_level={options.privilege_level}: expected a value in [0, 1]")


def _random_env(task: str, options: ProgressOptions):
    from batonlab.env.env import BatonEnv
    from batonlab.learned.frames import rollout_cfg
    from batonlab.tasks import make_task_cfg

    return BatonEnv(rollout_cfg(make_task_cfg(task), options.num_envs, options.seed))


def _policy_env(options: ProgressOptions):
    """(env, policy, task) of the run in `options.policy`, the env set up for rollouts."""
    from batonlab.cli.common import build_invocation
    from batonlab.cli.policy_loading import load_trained
    from batonlab.learned.frames import rollout_cfg

    inv = build_invocation([f"run_dir={options.policy}", f"seed={options.seed}"])
    if inv.task_name not in options.tasks:
        raise CliError(f"policy={options.policy} is a policy of {inv.task_name}, which is not in tasks={options.tasks}")
    inv.task = rollout_cfg(inv.task, options.num_envs, options.seed)
    env, runner, _, ckpt = load_trained(inv)
    env.privilege_manager.set_level(options.privilege_level, now=True)
    print(f"[batonlab] rollouts of {inv.task_name} with the policy of {ckpt} at λ = {options.privilege_level}", file=sys.stderr)
    return env, runner.inference_policy(), inv.task_name
