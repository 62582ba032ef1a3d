# SPDX-License-Identifier: BSD-3-Clause
"""Rendered rollouts for progress encoders: low-resolution frames of whole episodes, with the
simulator's true task progress beside them (to check an estimate against, never to train on).

A rollout starts at an env reset and runs for a fixed number of control steps, shorter than the
episode, so that every env contributes one uninterrupted episode; envs that end early (a dropped
object, a diverged world) are left out. Frames come from `env.render_progress`: the task's
`progress_camera` and geom groups, no shadows or reflections (ten times cheaper), the same view the
reward term renders at training.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from batonlab.env.cfg import TaskCfg
from batonlab.rl.rollout import rollout, smoothed_noise

Policy = Callable[[object], torch.Tensor]
"""Observation TensorDict → actions (num_envs, num_actions), e.g. a runner's inference policy."""


@dataclass
class Rollouts:
    """Episodes of one task, frame by frame."""

    task: str
    frames: np.ndarray
    """(num_episodes, num_frames, H, W, 3) uint8 RGB."""
    progress: np.ndarray
    """(num_episodes, num_frames) true progress in [0, 1]; NaN for a task without a truth function."""
    frame_every: int
    """Control steps between two frames."""
    source: str
    """Where the actions came from: "policy" or "random"."""
    measures: np.ndarray | None = None
    """(num_episodes, num_frames, k) the raw measurements `progress` was computed from (the truth's
    `measure`, e.g. arm_reach's tool-to-target distance [m]); None for a task without a truth function."""

    @property
    def num_episodes(self) -> int:
        """Number of recorded episodes."""
        return self.frames.shape[0]


# Collection.


def rollout_cfg(cfg: TaskCfg, num_envs: int, seed: int = 0) -> TaskCfg:
    """A copy of a task config for collecting rollouts: no curricula (λ stays where the config puts
    it) and commands held for the whole episode (a target redrawn mid-episode would make
    `1 - d(t) / d(0)` meaningless)."""
    cfg = copy.deepcopy(cfg)
    cfg.num_envs, cfg.seed = num_envs, seed
    cfg.curriculum = {}
    for command in cfg.commands.values():
        command.resampling_time_range_s = (1e6, 1e6)
    return cfg


@torch.inference_mode()
def collect_rollouts(env, task: str, episodes: int, num_steps: int | None = None, frame_every: int = 2,
                     policy: Policy | None = None, size: int = 64, action_smoothing: float = 0.9,
                     progress_bar: bool = True) -> Rollouts:
    """Run `episodes` episodes in batches of `env.num_envs` and render every `frame_every`-th step.

    Args:
        env: A `BatonEnv` of `task`, preferably built from `rollout_cfg`.
        task: Its name (for the progress bar).
        num_steps: Control steps per episode (default: all but the last step of the episode).
        policy: Acts on the observation; None: random actions, a low-pass filtered walk (each step
            `a ← s·a + sqrt(1 - s²)·N(0, 1)` with s = `action_smoothing`, clipped to [-1, 1]), which moves
            the arm through poses instead of jittering around its start.
        size: Frames are `size` × `size` pixels.
    """
    num_steps = num_steps or env.max_episode_length - 1
    if num_steps >= env.max_episode_length:
        raise ValueError(f"num_steps={num_steps} must be shorter than the episode ({env.max_episode_length} steps)")
    truth = env.progress_term
    ids = list(range(env.num_envs))
    batches = -(-episodes // env.num_envs)
    frames, progress, raw = [], [], []
    bar = tqdm(total=batches * len(range(0, num_steps, frame_every)), desc=f"render {task}", unit="frame batch",
               disable=not progress_bar)
    for _ in range(batches):
        obs, _ = env.reset()
        alive = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
        batch_frames, measures = [], []

        def record(step: int) -> None:
            if step % frame_every == 0 and step < num_steps:
                batch_frames.append(env.render_progress(ids, (size, size)))
                if truth is not None:
                    measures.append(truth.measure(env).clone())
                bar.update(1)

        record(0)
        act = policy if policy is not None else smoothed_noise(env, action_smoothing)
        for step in rollout(env, obs, act, num_steps):
            alive &= ~step.done
            record(step.index + 1)
        keep = alive.cpu().numpy()
        frames.append(np.stack(batch_frames, axis=1)[keep])
        if truth is not None:
            stacked = torch.stack(measures, dim=1)
            progress.append(truth.progress(stacked, start=stacked[:, :1]).cpu().numpy()[keep])
            raw.append(stacked.cpu().numpy()[keep])
        else:
            progress.append(np.full(frames[-1].shape[:2], np.nan, dtype=np.float32))
    bar.close()
    frames_all = np.concatenate(frames)[:episodes]
    progress_all = np.concatenate(progress)[:episodes].astype(np.float32)
    measures_all = np.concatenate(raw)[:episodes].astype(np.float32) if raw else None
    return Rollouts(task, frames_all, progress_all, frame_every, "random" if policy is None else "policy", measures_all)
