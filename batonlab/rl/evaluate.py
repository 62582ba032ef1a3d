# SPDX-License-Identifier: BSD-3-Clause
"""Policy evaluation: one episode per env, success judged on each episode's last step."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
from tqdm import tqdm

from batonlab.env.commands import episode_mean_errors
from batonlab.env.env import BatonEnv
from batonlab.env.episodes import EpisodeSummary, summarize_episodes
from batonlab.rl.rollout import rollout
from batonlab.utils.threads import torch_threads


@dataclass
class EvalResult:
    """Outcome of one evaluation: per-episode arrays (num_episodes,) plus their summaries."""
    num_episodes: int
    success_rate: float
    mean_return: float
    successes: np.ndarray
    """(num_episodes,) bool, success of each env's first episode."""
    returns: np.ndarray
    """(num_episodes,) undiscounted return of each env's first episode."""
    lengths: np.ndarray
    """(num_episodes,) length of each env's first episode [control steps]."""
    terminated: np.ndarray
    """(num_episodes,) bool, the first episode ended by a failure term rather than by a time limit."""
    frames: list[np.ndarray] = field(default_factory=list)
    """RGB frames of the recorded episodes, back to back."""
    mean_errors: dict[str, np.ndarray] = field(default_factory=dict)
    """(num_episodes,) mean tracking error of each env's first episode, per command metric
    (`batonlab.env.commands.episode_mean_errors`: `base_velocity/lin_vel_error` [m/s], `ee_target/ee_error` [m])."""

    def summary(self) -> EpisodeSummary:
        """Rates and mean errors over the episodes (`batonlab.env.episodes`)."""
        return summarize_episodes(self.successes, self.terminated, self.mean_errors, self.returns)


StepCallback = Callable[[BatonEnv, object, "torch.Tensor | None", "torch.Tensor | None"], None]
"""`(env, obs, actions, done)`; see `evaluate`."""


@torch.inference_mode()
def evaluate(env: BatonEnv, policy, video_env_ids: tuple[int, ...] = (), video_size=(240, 320), progress: bool = True,
             step_callback: StepCallback | None = None) -> EvalResult:
    """Run `policy` (TensorDict → actions) until every env has finished one episode.

    Every env contributes exactly its first episode, so short (failed) episodes are not
    over-represented. Envs listed in `video_env_ids` are rendered until their episode ends.

    `step_callback(env, obs, actions, done)` (e.g. a `batonlab.logs.EpisodeRecorder`) is called
    once after the reset with `actions=None, done=None`, then after every `env.step` with the
    observation the actions were computed from, the actions and the (num_envs,) bool mask of envs
    whose episode ended. At that point `env.sim.ctrl` still holds the targets applied during the
    step, and the envs that did not finish are in their next state.
    """
    # On the CPU the physics threads own the cores; the policy runs on one (as in training's rollouts).
    with torch_threads(1) if torch.device(env.device).type == "cpu" else contextlib.nullcontext():
        return _evaluate(env, policy, video_env_ids, video_size, progress, step_callback)


def _evaluate(env: BatonEnv, policy, video_env_ids, video_size, progress: bool,
              step_callback: StepCallback | None) -> EvalResult:
    obs, _ = env.reset()
    if step_callback is not None:
        step_callback(env, obs, None, None)
    n = env.num_envs
    finished = torch.zeros(n, dtype=torch.bool, device=env.device)
    successes = torch.zeros(n, dtype=torch.bool, device=env.device)
    returns = torch.zeros(n, device=env.device)
    lengths = torch.zeros(n, dtype=torch.long, device=env.device)
    failed = torch.zeros(n, dtype=torch.bool, device=env.device)
    errors: dict[str, torch.Tensor] = {}
    running = torch.zeros(n, device=env.device)
    recording = list(video_env_ids)
    per_env_frames: dict[int, list[np.ndarray]] = {i: [] for i in recording}
    bar = tqdm(total=n, desc="episodes", disable=not progress, unit="ep")

    def render(ids: list[int]) -> None:
        for i, frame in zip(ids, env.render(ids, video_size) if ids else ()):
            per_env_frames[i].append(frame)

    render(recording)
    for step in rollout(env, obs, policy):
        if step_callback is not None:
            step_callback(env, step.obs, step.actions, step.done)
        running += step.reward
        done = step.done & ~finished
        successes[done] = step.extras["success"][done]
        returns[done] = running[done]
        lengths[done] = step.extras["episode_length"][done]
        failed[done] = step.terminated[done]
        for key, value in episode_mean_errors(step.extras.get("command_metrics", {})).items():
            errors.setdefault(key, torch.zeros(n, device=env.device))[done] = value[done]
        finished |= done
        running[step.done] = 0.0
        recording = [i for i in recording if not finished[i]]
        bar.update(int(done.sum()))
        if finished.all():
            break
        render(recording)
    bar.close()
    frames = [f for i in video_env_ids for f in per_env_frames[i]]
    return EvalResult(
        num_episodes=n,
        success_rate=successes.float().mean().item(),
        mean_return=returns.mean().item(),
        successes=successes.cpu().numpy(),
        returns=returns.cpu().numpy(),
        lengths=lengths.cpu().numpy(),
        terminated=failed.cpu().numpy(),
        frames=frames,
        mean_errors={key: value.cpu().numpy() for key, value in errors.items()},
    )
