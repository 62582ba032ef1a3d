# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab play task=NAME [run_dir=…] [play.num_episodes=200]`: success rate and a video (of a trained policy, or
of the task's scripted expert with `play.expert=true`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from batonlab.cli.common import INTERRUPTED, CliError, Invocation, StopRequest, seed_everything, stop_on_signals
from batonlab.cli.policy_loading import load_trained
from batonlab.env.env import BatonEnv
from batonlab.env.terms import build_term
from batonlab.logs.sim_recorder import EpisodeRecorder, RecordingError
from batonlab.rl.evaluate import evaluate
from batonlab.sim.render import write_mp4
from batonlab.utils.files import atomic_write_text


def run(inv: Invocation) -> int:
    """`batonlab play`: evaluate a trained policy (video, recording optional); returns the exit code."""
    top = inv.top
    seed_everything(top.seed)
    inv.task.num_envs = top.play.num_episodes
    if top.play.expert:
        env, policy, run_dir, ckpt = _expert(inv)
    else:
        env, runner, run_dir, ckpt = load_trained(inv)
        if top.verbose:
            print(runner.model_summary, end="")
        policy = runner.inference_policy()
    video_ids = tuple(range(min(top.play.video_episodes, env.num_envs))) if top.play.video else ()
    size = (top.play.video_height, top.play.video_width)
    try:
        recorder = _recorder(inv, env, run_dir, ckpt) if top.record else None
    except RecordingError as err:
        env.close()
        raise CliError(str(err)) from None
    stop = StopRequest()
    try:
        with stop_on_signals(stop):
            result = evaluate(env, policy, video_env_ids=video_ids, video_size=size, progress=top.progress,
                              step_callback=_step_callback(stop, recorder))
    except KeyboardInterrupt:
        result = None
    except RecordingError as err:
        _close_after_fault(recorder)
        raise CliError(f"{err} (the bags finished before it are intact)") from None
    # Bags get their summary and metadata.yaml however the rollout ended.
    try:
        bags = recorder.close() if recorder is not None else []
    except RecordingError as err:
        raise CliError(f"{err} (the bags finished before it are intact)") from None
    if result is None:
        closed = f"; closed {len(bags)} bags in {top.record} (their episodes cut short)" if bags else ""
        print(f"[batonlab] interrupted{closed}")
        env.close()
        return INTERRUPTED
    if recorder is not None:
        print(f"[batonlab] recorded {len(bags)} episodes to {Path(top.record)}: {', '.join(b.name for b in bags)}")
    out = run_dir / "play"
    out.mkdir(parents=True, exist_ok=True)
    metrics = {"task": inv.task_name, "checkpoint": str(ckpt), "seed": int(top.seed), **result.summary().as_dict()}
    atomic_write_text(out / "metrics.json", json.dumps(metrics, indent=2))
    print(f"[batonlab] {inv.task_name}: success rate {result.success_rate:.3f} over {result.num_episodes} episodes "
          f"(mean return {result.mean_return:.3f}) from {ckpt}")
    if result.mean_errors:
        errors = ", ".join(f"{key} {value:.3f}" for key, value in metrics["mean_errors"].items())
        print(f"[batonlab] survival {metrics['survival_rate']:.3f}; mean tracking errors: {errors}")
    if result.frames:
        video = out / "rollout.mp4"
        write_mp4(video, result.frames, fps=1.0 / env.step_dt)
        print(f"[batonlab] video: {video} ({len(result.frames)} frames)")
    env.close()
    return 0


def _expert(inv: Invocation):
    """The env, the task's scripted expert as a policy, its output folder, and what metrics and bags name as the
    policy ("expert"), for `play.expert=true`."""
    if inv.task.expert is None:
        raise CliError(f"task '{inv.task_name}' has no scripted expert (play.expert=true plays one)")
    if inv.top.run_dir or inv.top.checkpoint:
        raise CliError("play.expert=true plays the task's scripted expert: drop run_dir= / checkpoint=")
    env = BatonEnv(inv.task)
    expert = build_term(inv.task.expert.func, inv.task.expert.params, env, "expert")
    run_dir = Path(inv.top.log_root) / inv.agent.experiment_name / "expert"
    return env, (lambda obs: expert(env)), run_dir, Path("expert")


def _close_after_fault(recorder) -> None:
    """Close the bags still open after one failed; their own failures (the same full disk) add nothing."""
    try:
        recorder.close()
    except RecordingError:
        pass


def _step_callback(stop: StopRequest, recorder):
    """`evaluate`'s step callback: record the step, or end the rollout between two steps once asked to stop."""

    def step(env, obs, actions, done) -> None:
        if stop.requested:
            raise KeyboardInterrupt
        if recorder is not None:
            recorder(env, obs, actions, done)

    return step


def _recorder(inv: Invocation, env, run_dir: Path, ckpt: Path):
    """One bag per episode of the first `play.record_episodes` envs, in `record=DIR`."""
    # A bag that fails is play's one-line error (RecordingError); the recorder's own log line would repeat it.
    logging.getLogger("batonlab.deploy.recording").setLevel(logging.CRITICAL)
    metadata = {"seed": int(inv.top.seed), "checkpoint": str(ckpt), "run_dir": str(run_dir)}
    if inv.top.robot:
        metadata["robot_file"] = inv.top.robot  # replay rebuilds this robot (`make_replay_env`)
    export_dir = run_dir / "exported"
    manifest_path = export_dir / "manifest.json"
    if manifest_path.is_file():
        # The run's export, if it is of this checkpoint: bags then name the manifest a robot would load.
        from batonlab.export.manifest import sha256_file

        exported = json.loads(manifest_path.read_text())
        if exported.get("training_config", {}).get("checkpoint") == str(ckpt):
            metadata.update(manifest_sha256=sha256_file(manifest_path), manifest_source="export", export_dir=str(export_dir))
    return EpisodeRecorder(env, inv.top.record, inv.top.play.record_episodes, inv.task_name, metadata)
