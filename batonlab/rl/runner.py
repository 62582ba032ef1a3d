# SPDX-License-Identifier: BSD-3-Clause
"""The training loop: rsl-rl's PPO, batonlab's progress bar, TensorBoard logs and atomic checkpoints.

rsl-rl's own OnPolicyRunner prints a page per iteration, saves non-atomically and loads pickles
with `weights_only=False`; this runner reuses its algorithm and storage and owns the rest, so a
reader can follow one iteration from top to bottom here.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from pathlib import Path

import torch
from rsl_rl.algorithms import PPO
from tqdm import tqdm

from batonlab.rl import checkpoint
from batonlab.rl.cfg import RunnerCfg, to_rsl_rl_dict
from batonlab.rl.distributed import DistributedContext
from batonlab.rl.vecenv import RslRlVecEnv

CHECKPOINT_VERSION = 1


class BatonRunner:
    """On-policy PPO training over a `RslRlVecEnv`.

    Args:
        env: The adapted environment.
        cfg: Runner, policy and algorithm settings.
        log_dir: Run folder for checkpoints and TensorBoard events; None disables both.
        device: Device of the learner (the env may live elsewhere).
    """

    def __init__(
        self,
        env: RslRlVecEnv,
        cfg: RunnerCfg,
        log_dir: str | Path | None = None,
        device: str = "cpu",
        distributed: DistributedContext | None = None,
    ):
        self.env = env
        self.cfg = cfg
        self.device = device
        self.distributed = distributed
        # Under torchrun only rank 0 writes logs and checkpoints.
        self.is_main = distributed is None or distributed.is_main
        self.log_dir = Path(log_dir) if log_dir is not None and self.is_main else None
        self.train_cfg = to_rsl_rl_dict(cfg, multi_gpu=distributed.rsl_rl_cfg() if distributed else None)
        self.alg: PPO = PPO.construct_algorithm(env.get_observations(), env, self.train_cfg, device)
        self.iteration = 0
        """Number of completed learning iterations."""
        self.total_env_steps = 0
        self._writer = None
        self._episode_returns: deque[float] = deque(maxlen=200)
        self._episode_lengths: deque[float] = deque(maxlen=200)
        self._return_acc = torch.zeros(env.num_envs, device=device)
        self._length_acc = torch.zeros(env.num_envs, device=device)

    # Training.

    def learn(self, max_iterations: int | None = None, progress: bool = True) -> dict[str, float]:
        """Train until `max_iterations` iterations are completed in total (resumed runs continue).

        Returns the statistics of the last iteration.
        """
        total = self.cfg.max_iterations if max_iterations is None else max_iterations
        if self.iteration == 0:
            # Spread episode phases so that resets (and their log lines) are not synchronised.
            self.env.episode_length_buf = torch.randint_like(self.env.episode_length_buf, high=int(self.env.max_episode_length))
        obs = self.env.get_observations().to(self.device)
        self.alg.train_mode()
        if self.distributed is not None:
            self.alg.broadcast_parameters()  # every rank starts from rank 0's weights
        bar = tqdm(total=total, initial=self.iteration, unit="it", disable=not (progress and self.is_main), dynamic_ncols=True)
        stats: dict[str, float] = {}
        while self.iteration < total:
            start = time.perf_counter()
            episode_logs: list[dict] = []
            with torch.inference_mode():
                for _ in range(self.cfg.num_steps_per_env):
                    actions = self.alg.act(obs)
                    obs, rewards, dones, extras = self.env.step(actions.to(self.env.device))
                    obs, rewards, dones = obs.to(self.device), rewards.to(self.device), dones.to(self.device)
                    self.alg.process_env_step(obs, rewards, dones, extras)
                    self._track_episodes(rewards, dones)
                    if extras.get("log"):
                        episode_logs.append(extras["log"])
                self.alg.compute_returns(obs)
                # Curricula that learn from the learner's signal (the bandit) see every transition's |advantage|.
                abs_advantage = self.alg.storage.advantages.abs().reshape(self.cfg.num_steps_per_env, -1)
                self.env.env.curriculum_manager.observe_advantages(abs_advantage.to(self.env.device))
            collect_time = time.perf_counter() - start
            start = time.perf_counter()
            losses = self.alg.update()
            learn_time = time.perf_counter() - start

            self.iteration += 1
            steps = self.cfg.num_steps_per_env * self.env.num_envs
            self.total_env_steps += steps
            stats = self._iteration_stats(losses, episode_logs, steps, collect_time, learn_time)
            self._write_tensorboard(stats)
            bar.update(1)
            bar.set_postfix(
                {k: f"{stats[v]:.3g}" for k, v in (("steps/s", "Perf/steps_per_s"), ("return", "Train/mean_return"),
                                                    ("success", "Episode/success_rate")) if v in stats}
            )
            if self.log_dir is not None and (self.iteration % self.cfg.save_interval == 0 or self.iteration == total):
                self.save(self.log_dir / f"model_{self.iteration}.pt")
        bar.close()
        if self._writer is not None:
            self._writer.flush()
        return stats

    def _track_episodes(self, rewards: torch.Tensor, dones: torch.Tensor) -> None:
        self._return_acc += rewards
        self._length_acc += 1
        done = dones > 0
        if done.any():
            self._episode_returns.extend(self._return_acc[done].tolist())
            self._episode_lengths.extend(self._length_acc[done].tolist())
            self._return_acc[done] = 0.0
            self._length_acc[done] = 0.0

    def _iteration_stats(self, losses, episode_logs, steps, collect_time, learn_time) -> dict[str, float]:
        stats = {f"Loss/{k}": float(v) for k, v in losses.items()}
        stats["Loss/learning_rate"] = float(self.alg.learning_rate)
        stats["Policy/mean_std"] = float(self.alg.get_policy().output_std.detach().mean())
        stats["Perf/steps_per_s"] = steps / (collect_time + learn_time)
        stats["Perf/collection_time_s"] = collect_time
        stats["Perf/learning_time_s"] = learn_time
        if self._episode_returns:
            stats["Train/mean_return"] = statistics.fmean(self._episode_returns)
            stats["Train/mean_episode_length"] = statistics.fmean(self._episode_lengths)
        # Episode statistics stay tensors during the rollout (no device sync per step); one sync per key here.
        for key in dict.fromkeys(k for log in episode_logs for k in log):
            values = [torch.as_tensor(log[key], dtype=torch.float32, device=self.env.device).reshape(())
                      for log in episode_logs if key in log]
            stats[key] = torch.stack(values).mean().item()
        stats["Metrics/physics_diverged_total"] = float(self.env.env.sim.num_diverged_total)
        return stats

    def _write_tensorboard(self, stats: dict[str, float]) -> None:
        if self.log_dir is None:
            return
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(self.log_dir), flush_secs=10)
        for key, value in stats.items():
            self._writer.add_scalar(key, value, self.iteration)

    # Checkpoints.

    def state_dict(self) -> dict:
        """Everything a resumed run needs: models (with normaliser statistics), optimizer, curriculum."""
        state = self.alg.save()
        state.update(
            version=CHECKPOINT_VERSION,
            iter=self.iteration,
            total_env_steps=self.total_env_steps,
            curriculum=self.env.env.curriculum_manager.state_dict(),
            common_step_counter=self.env.env.common_step_counter,
        )
        return state

    def save(self, path: str | Path) -> Path:
        return checkpoint.save_atomic(self.state_dict(), path)

    def load(self, path: str | Path, load_optimizer: bool = True) -> None:
        state = checkpoint.load(path, map_location=self.device)
        if state.get("version") != CHECKPOINT_VERSION:
            raise RuntimeError(f"checkpoint {path} has version {state.get('version')}, expected {CHECKPOINT_VERSION}")
        self.alg.load(state, {"actor": True, "critic": True, "optimizer": load_optimizer, "iteration": True}, strict=True)
        self.iteration = int(state["iter"])
        self.total_env_steps = int(state["total_env_steps"])
        self.env.env.curriculum_manager.load_state_dict(state["curriculum"])
        self.env.env.common_step_counter = int(state["common_step_counter"])

    def inference_policy(self):
        """The deterministic actor (mean action) in eval mode."""
        self.alg.eval_mode()
        return self.alg.get_policy()
