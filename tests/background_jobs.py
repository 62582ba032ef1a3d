# SPDX-License-Identifier: BSD-3-Clause
"""The session fixtures' long setups other than a `fixture_trainings.TRAININGS` row (`fixture_trainings.JOBS`),
run by the background process (`fixture_trainer`) on one core while the tests in front run: each writes into
its folder and returns a JSON-able dict that the fixture of the same name reads back."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from batonlab.cli.common import build_invocation
from batonlab.cli.train import train
from batonlab.env.env import BatonEnv
from batonlab.learned.frames import Rollouts, collect_rollouts, rollout_cfg
from batonlab.learned.progress_encoder import EncoderCfg, TrainCfg, save_encoder, train_encoder
from batonlab.learned.progress_matcher import save_demo
from batonlab.tasks import make_task_cfg
from batonlab.utils.threads import torch_threads
from cli_training import load_policy
from fixture_trainer import BACKGROUND_OVERRIDES
from robot_files import write_urdf_arm

# The gripper arm's reach with the defaults.


def train_gripper_arm_reach(out_dir: Path, runs: dict) -> dict:
    """`batonlab train task=reach robot=<URDF arm with a gripper> seed=0` with the task's defaults (and its closing
    evaluation), as tests/tasks/test_reach_any_robot.py asserts on it."""
    robot = write_urdf_arm(out_dir / "robot", gripper=True)
    result = train(build_invocation(["task=reach", f"robot={robot}", "seed=0", f"log_root={out_dir / 'logs'}",
                                     "progress=false", *BACKGROUND_OVERRIDES]))
    return {"run_dir": str(result.run_dir), "robot": str(robot), "success_rate": result.evaluation.success_rate,
            "eval_episodes": result.evaluation.num_episodes, "iterations": result.iterations,
            "planned_iterations": result.plan.total_iterations, "env_steps": result.env_steps,
            "train_wall_s": result.wall_s, "stopped_by": result.stopped_by}


# Progress encoders of arm_reach and arm_lift (tests/learned/test_progress_reward.py).

POLICY_ROLLOUT = {"arm_reach": {"num_steps": 12, "frame_every": 1}, "arm_lift": {"num_steps": 24, "frame_every": 1}}
"""Policy episodes are rendered every control step over the part where the task happens: arm_reach's
policy is at its target within about 10 steps (0.2 s), arm_lift's teacher (λ = 1) has the cube up
within 16-22 (the nearer the cube, the sooner). Longer episodes would add frames of a finished task, which look alike."""

RANDOM_ROLLOUT = {"num_steps": 199, "frame_every": 4}
"""Random-action episodes: the whole 4 s episode, a frame every 4 steps."""

HELDOUT_EPISODES = 32
"""Held-out policy episodes per task. With 12 (144 arm_reach frames) the same encoder's pooled Spearman
moved by up to 0.1 from one held-out set to another; 32 pin it to a few hundredths."""

ENCODER = EncoderCfg(channels=(8, 16, 32, 32))
TRAIN = {"arm_reach": TrainCfg(steps=1500, max_shift=2), "arm_lift": TrainCfg(steps=1500, max_shift=2, negative_gap=8)}
"""Per task, the encoder's training. arm_lift's teacher trains under the arm's command filter (3 rad/s), so
how soon it has the cube up depends on how far the cube is: frames 4 steps apart in time-aligned
episodes are often the same stage of the lift, and pushing them apart as negatives left the pooled
Spearman at 0.34-0.82 over encoder seeds 0-3; with negatives 8 steps apart, 0.83-0.92 over seeds 0-4."""

PROGRESS_POLICIES = {"arm_reach": "arm_reach_policy", "arm_lift": "arm_lift_teacher"}
"""Per task, the session fixture whose policy acts in its episodes (arm_lift's teacher acts at λ = 1)."""


def _rollouts(task: str, policy, episodes: int, seed: int) -> Rollouts:
    env = BatonEnv(rollout_cfg(make_task_cfg(task), min(episodes, 16), seed))
    try:
        spec = POLICY_ROLLOUT[task] if policy is not None else RANDOM_ROLLOUT
        return collect_rollouts(env, task, episodes, policy=policy, progress_bar=False, **spec)
    finally:
        env.close()


def train_progress_encoders(out_dir: Path, runs: dict) -> dict:
    """Per task, an encoder trained on 8 random-action episodes (50 frames each) and 48 policy episodes (one
    time-aligned group where the task aligns them), all at 64 × 64; a demo and 32 held-out policy episodes
    (`heldout_<task>.npz`: frames, progress, measures). Returns the files and the training frame counts."""
    files = {}
    with torch_threads(1):
        for task, fixture in PROGRESS_POLICIES.items():
            policy = load_policy(runs[fixture].run_dir)
            random_episodes = list(_rollouts(task, None, 8, seed=1).frames)
            policy_episodes = list(_rollouts(task, policy, 48, seed=2).frames)
            training = random_episodes + policy_episodes
            aligned = make_task_cfg(task).scene.progress_align_episodes  # arm_lift: yes; arm_reach's tool view: no
            groups = [None] * len(random_episodes) + [0 if aligned else None] * len(policy_episodes)
            demo = save_demo(out_dir / f"{task}_demo.npz", _rollouts(task, policy, 1, seed=3).frames[0])
            heldout = _rollouts(task, policy, HELDOUT_EPISODES, seed=4)
            np.savez(out_dir / f"heldout_{task}.npz", frames=heldout.frames, progress=heldout.progress,
                     measures=heldout.measures, frame_every=heldout.frame_every)
            encoder = train_encoder(training, ENCODER, TRAIN[task], aligned_groups=groups, progress_bar=False)
            num_frames = sum(len(e) for e in training)
            encoder_path = save_encoder(out_dir / f"{task}_encoder.pt", encoder, [task], num_frames, TRAIN[task])
            files[task] = {"encoder": str(encoder_path), "demo": str(demo),
                           "heldout": str(out_dir / f"heldout_{task}.npz"), "num_frames": num_frames}
    return files


def load_heldout(path: str | Path, task: str) -> Rollouts:
    """The held-out policy episodes `train_progress_encoders` saved."""
    data = np.load(path)
    return Rollouts(task, data["frames"], data["progress"], int(data["frame_every"]), "policy", data["measures"])
