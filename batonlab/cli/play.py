# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab play task=NAME [run_dir=…] [play.num_episodes=200]`: success rate and a video."""

from __future__ import annotations

import json

from batonlab.cli.common import Invocation, seed_everything
from batonlab.cli.policy_loading import load_trained
from batonlab.rl.evaluate import evaluate
from batonlab.sim.render import write_mp4


def run(inv: Invocation) -> int:
    top = inv.top
    seed_everything(int(top.seed))
    inv.task.num_envs = int(top.play.num_episodes)
    env, runner, run_dir, ckpt = load_trained(inv)
    policy = runner.inference_policy()
    video_ids = tuple(range(min(int(top.play.video_episodes), env.num_envs))) if top.play.video else ()
    size = (int(top.play.video_height), int(top.play.video_width))
    result = evaluate(env, policy, video_env_ids=video_ids, video_size=size, progress=bool(top.progress))
    out = run_dir / "play"
    out.mkdir(parents=True, exist_ok=True)
    metrics = {
        "task": inv.task_name,
        "checkpoint": str(ckpt),
        "seed": int(top.seed),
        "num_episodes": result.num_episodes,
        "success_rate": result.success_rate,
        "mean_return": result.mean_return,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2))
    print(f"[batonlab] {inv.task_name}: success rate {result.success_rate:.3f} over {result.num_episodes} episodes "
          f"(mean return {result.mean_return:.3f}) from {ckpt}")
    if result.frames:
        video = out / "rollout.mp4"
        write_mp4(video, result.frames, fps=1.0 / env.step_dt)
        print(f"[batonlab] video: {video} ({len(result.frames)} frames)")
    env.close()
    return 0
