# SPDX-License-Identifier: BSD-3-Clause
"""The training loop: rsl-rl's PPO (or batonlab's constrained PPO, or rsl-rl's Distillation),
batonlab's progress bar, TensorBoard logs and atomic checkpoints.

rsl-rl's own OnPolicyRunner prints a page per iteration, saves non-atomically and loads pickles
with `weights_only=False`; this runner reuses its algorithm and storage and owns the rest, so a
reader can follow one iteration from top to bottom here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import os
import statistics
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import torch
from rsl_rl.algorithms import PPO, Distillation
from tqdm import tqdm

from batonlab.rl import checkpoint
from batonlab.rl.cfg import RunnerCfg, to_rsl_rl_dict
from batonlab.rl.constrained import ConstrainedPPO
from batonlab.rl.cost_stats import RolloutCostStats
from batonlab.rl.distributed import DistributedContext
from batonlab.rl.residual_model import last_action_columns
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.utils.threads import torch_threads


class BatonRunner:
    """On-policy PPO training over a `RslRlVecEnv`; `cfg.algorithm.class_name` picks rsl-rl's PPO, a
    constrained PPO (P3O, PPOLagrangian) that learns from the env's costs, or rsl-rl's Distillation.

    Distillation trains a student (the deployable observation groups) to output the actions of a
    teacher (`cfg.teacher`, loaded with `load_teacher`, or with a distillation checkpoint by `load`);
    it learns from no reward, so there are no returns, advantages or critic.

    Args:
        env: The adapted environment.
        cfg: Runner, policy and algorithm settings.
        log_dir: Run folder for checkpoints and TensorBoard events; None disables both.
        device: Device of the learner (the env may live elsewhere).
        distributed: This process's place in a torchrun job, or None.
        verbose: Print rsl-rl's summary of the models (otherwise kept in `model_summary`).
    """

    def __init__(
        self,
        env: RslRlVecEnv,
        cfg: RunnerCfg,
        log_dir: str | Path | None = None,
        device: str = "cpu",
        distributed: DistributedContext | None = None,
        verbose: bool = False,
    ):
        self.env = env
        self.cfg = cfg
        self.device = device
        self.distributed = distributed
        # Under torchrun only rank 0 writes logs and checkpoints.
        self.is_main = distributed is None or distributed.is_main
        self.log_dir = Path(log_dir) if log_dir is not None and self.is_main else None
        cost_names = env.cost_names
        if cfg.algorithm.is_constrained and not cost_names:
            raise ValueError(f"agent.algorithm.class_name={cfg.algorithm.class_name} learns from constraint costs, "
                             "but this task has no `costs` (TaskCfg.costs is empty): add CostTermCfg terms to the "
                             "task's `costs`, or train it with class_name=PPO")
        self.distillation = cfg.algorithm.is_distillation
        """Whether a student imitates a teacher (rsl-rl's Distillation) instead of learning from rewards."""
        privileged = env.privileged_groups
        self.train_cfg = to_rsl_rl_dict(cfg, multi_gpu=distributed.rsl_rl_cfg() if distributed else None,
                                        num_costs=len(cost_names), privileged_groups=privileged)
        if cfg.policy.last_action_residual:
            model = "student" if self.distillation else "actor"
            layouts = [env.observation_layout(group) for group in self.train_cfg["obs_groups"][model]]
            self.train_cfg[model]["residual_columns"] = last_action_columns(layouts, env.num_actions)
        if self.distillation:
            # The teacher's labels are clamped where the executed command saturates (`executed_distillation.py`).
            low, high = env.action_saturation_bounds()
            self.train_cfg["algorithm"]["label_bounds"] = (low.tolist(), high.tolist())
        # rsl-rl prints the observation sets and both models while it builds them; that text is
        # kept for `verbose` callers instead of filling every command's output. Errors still raise.
        summary = io.StringIO()
        algorithm_class = Distillation if self.distillation else PPO
        with contextlib.redirect_stdout(summary):
            self.alg: PPO | Distillation = algorithm_class.construct_algorithm(env.get_observations(), env,
                                                                              self.train_cfg, device)
        if self.distillation and cfg.teacher.expert:
            self.alg.teacher_loaded = True  # the task's scripted expert: nothing to load
        self.model_summary = summary.getvalue()
        """rsl-rl's printout of the observation sets and the models (actor and critic, or student and teacher)."""
        self.constrained = isinstance(self.alg, ConstrainedPPO)
        """Whether the algorithm learns from the costs (P3O, PPOLagrangian)."""
        self.cost_stats = RolloutCostStats(cost_names, env.device)
        """Per-cost rollout statistics, logged for every algorithm."""
        if verbose:
            print(self.model_summary, end="")
        self.iteration = 0
        """Number of completed learning iterations."""
        self.total_env_steps = 0
        self.last_checkpoint: Path | None = None
        """The checkpoint this runner saved last."""
        self.finetuned_from: str | None = None
        """The distillation checkpoint whose student started this RL run's actor (`init_from_student`), if any."""
        self.stop_requested = False
        """Set by `request_stop`; `learn` then returns early with a checkpoint of the last iteration."""
        self._writer = None
        self._episode_returns: deque[float] = deque(maxlen=200)
        self._episode_lengths: deque[float] = deque(maxlen=200)
        self._return_acc = torch.zeros(env.num_envs, device=device)
        self._length_acc = torch.zeros(env.num_envs, device=device)

    # Training.

    def request_stop(self) -> None:
        """Make `learn` stop soon and save the last completed iteration (safe to call from a signal handler)."""
        self.stop_requested = True

    def learn(self, max_iterations: int | None = None, progress: bool = True,
              on_iteration: Callable[[BatonRunner, dict[str, float]], None] | None = None,
              should_stop: Callable[[BatonRunner, dict[str, float]], bool] | None = None) -> dict[str, float]:
        """Train until `max_iterations` iterations are completed in total (resumed runs continue), or `should_stop`.

        After `request_stop` it returns after the current env step (or, while the update runs, after
        the update) and saves the last completed iteration; the transitions of a partial rollout
        are not learned from. Under torchrun the ranks agree on stopping at the end of an
        iteration, so they stay in step.

        Args:
            max_iterations: Total iterations (default `cfg.max_iterations`).
            progress: Show a progress bar.
            on_iteration: Called after each iteration with the runner and that iteration's statistics.
            should_stop: Called after `on_iteration`; True ends training there, with a checkpoint of that
                iteration (one process only: not under torchrun).

        Returns the statistics of the last iteration.
        """
        total = self.cfg.max_iterations if max_iterations is None else max_iterations
        if self.distillation and not self.alg.teacher_loaded:
            raise RuntimeError("Distillation has no teacher: call load_teacher(<teacher checkpoint>) or load a "
                               "distillation checkpoint first")
        if self.iteration == 0:
            # Spread episode phases so that resets (and their log lines) are not synchronised.
            self.env.episode_length_buf = torch.randint_like(self.env.episode_length_buf, high=int(self.env.max_episode_length))
        obs = self.env.get_observations().to(self.device)
        self.alg.train_mode()
        if self.distributed is not None:
            self.alg.broadcast_parameters()  # every rank starts from rank 0's weights
        bar = tqdm(total=total, initial=self.iteration, unit="it", disable=not (progress and self.is_main), dynamic_ncols=True)
        stats: dict[str, float] = {}
        stop_mid_iteration = self.distributed is None  # ranks must run the same updates, so they stop together
        rollout_threads, update_threads = self._thread_counts()
        while self.iteration < total:
            start = time.perf_counter()
            episode_logs: list[dict] = []
            with torch.inference_mode(), torch_threads(rollout_threads):
                for _ in range(self.cfg.num_steps_per_env):
                    if self.stop_requested and stop_mid_iteration:
                        break
                    actions = self.alg.act(obs)
                    obs, rewards, dones, extras = self.env.step(actions.to(self.env.device))
                    obs, rewards, dones = obs.to(self.device), rewards.to(self.device), dones.to(self.device)
                    self.alg.process_env_step(obs, rewards, dones, extras)
                    self._track_episodes(rewards, dones)
                    self.cost_stats.record(extras["costs"])
                    if extras.get("log"):
                        episode_logs.append(extras["log"])
                if self.stop_requested and stop_mid_iteration:
                    break
                if not self.distillation:  # imitation has no returns and no advantages
                    self.alg.compute_returns(obs)
                    # Curricula that learn from the learner's signal (the bandit) see every transition's |advantage|.
                    abs_advantage = self.alg.storage.advantages.abs().reshape(self.cfg.num_steps_per_env, -1)
                    self.env.observe_advantages(abs_advantage)
            collect_time = time.perf_counter() - start
            start = time.perf_counter()
            cost_limits = self.env.cost_limits()
            if self.constrained:
                self.alg.set_cost_limits(cost_limits)
            holding = not self.distillation and self.iteration < self.cfg.critic_warmup_iterations
            if not self.distillation:
                self._hold_actor(holding)
            learning_rate = self.alg.learning_rate
            with torch_threads(update_threads):
                losses = self.alg.update()
            if holding:  # a held actor moves no KL: the adaptive schedule must not raise the step meanwhile
                self.alg.learning_rate = learning_rate
                for group in self.alg.optimizer.param_groups:
                    group["lr"] = learning_rate
            learn_time = time.perf_counter() - start

            self.iteration += 1
            steps = self.cfg.num_steps_per_env * self.env.num_envs
            self.total_env_steps += steps
            stats = self._iteration_stats(losses, episode_logs, steps, collect_time, learn_time)
            stats.update(self.cost_stats.stats(cost_limits, stats, self.alg.constraint_stats() if self.constrained else {}))
            self._write_tensorboard(stats)
            bar.update(1)
            bar.set_postfix(
                {k: f"{stats[v]:.3g}" for k, v in (("steps/s", "Perf/steps_per_s"), ("return", "Train/mean_return"),
                                                    ("success", "Episode/success_rate")) if v in stats}
            )
            if on_iteration is not None:
                on_iteration(self, stats)
            done = should_stop is not None and self.iteration < total and should_stop(self, stats)
            if self.log_dir is not None and (self.iteration % self.cfg.save_interval == 0 or self.iteration == total
                                             or done):
                self.save(self.log_dir / f"model_{self.iteration}.pt")
            if done or self._agreed_stop():
                break
        bar.close()
        if self.stop_requested and self.log_dir is not None:
            path = self.log_dir / f"model_{self.iteration}.pt"
            if self.last_checkpoint != path:
                self.save(path)
        if self._writer is not None:
            self._writer.flush()
        return stats

    def _hold_actor(self, hold: bool) -> None:
        """Exclude the actor's parameters from the update (`critic_warmup_iterations`), or include them again."""
        for parameter in self.alg.actor.parameters():
            parameter.requires_grad_(not hold)

    def _thread_counts(self) -> tuple[int, int]:
        """torch threads of the rollout and of the update: on a CPU learner 1 and `cfg.learner_threads`
        (the physics threads own the cores during the rollout, the update has them to itself), else unchanged."""
        if torch.device(self.device).type != "cpu":
            return torch.get_num_threads(), torch.get_num_threads()
        if self.cfg.learner_threads or self.distributed is None:
            return 1, self.cfg.learner_threads
        return 1, max(1, (os.cpu_count() or 1) // self.distributed.world_size)  # ranks share the machine's cores

    def _agreed_stop(self) -> bool:
        """Whether to stop now; under torchrun, whether any rank was asked to (one tiny all-reduce)."""
        if self.distributed is None:
            return self.stop_requested
        flag = torch.tensor(float(self.stop_requested), device=self.device)
        torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
        self.stop_requested = bool(flag.item())
        return self.stop_requested

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
        stats["Policy/mean_std"] = float(output_std(self.alg.get_policy()).mean())
        if self.distillation:
            stats["Policy/teacher_action_prob"] = self.alg.beta  # DAgger's β of the next rollout
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
        stats["Metrics/physics_diverged_total"] = float(self.env.physics_diverged_total)
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
        """Everything a resumed run needs: models (with normaliser statistics), optimizer, curriculum;
        for a constrained algorithm also the cost critic and the multipliers; for Distillation the
        student, the teacher, and what rebuilds them (`teacher_cfg`, `student_obs_groups`); for RL what
        rebuilds the actor (`actor_cfg`: a fine-tuned student reads other groups than the task's default)."""
        state = self.alg.save()
        state.update(
            version=checkpoint.CHECKPOINT_VERSION,
            algorithm=self.cfg.algorithm.class_name,
            iter=self.iteration,
            total_env_steps=self.total_env_steps,
            **self.env.training_state(),
        )
        if self.distillation:
            state.update(teacher_cfg=dataclasses.asdict(self.cfg.teacher),
                         student_obs_groups=list(self.train_cfg["obs_groups"]["student"]),
                         student_last_action_residual=self.cfg.policy.last_action_residual)
        else:
            policy = self.cfg.policy
            state["finetuned_from"] = self.finetuned_from
            state["actor_cfg"] = {"obs_groups": list(self.train_cfg["obs_groups"]["actor"]),
                                  "hidden_dims": list(policy.actor_hidden_dims), "activation": policy.activation,
                                  "obs_normalization": policy.obs_normalization,
                                  "last_action_residual": policy.last_action_residual}
        return state

    def save(self, path: str | Path) -> Path:
        """Write `state_dict` to `path` atomically; returns the path written."""
        self.last_checkpoint = checkpoint.save_atomic(self.state_dict(), path)
        return self.last_checkpoint

    def load(self, path: str | Path, load_optimizer: bool = True) -> None:
        """Restore a checkpoint of `state_dict`.

        Resuming training (`load_optimizer=True`) needs a checkpoint of the same algorithm. Loading
        only the policy (play, export) takes the actor and critic of a checkpoint of any RL algorithm,
        and the cost critic and multipliers too where both are of the same constrained algorithm. A
        Distillation runner loads (student and teacher) only Distillation checkpoints, and only it
        does (an RL checkpoint is a teacher: `load_teacher`).

        Raises:
            FileNotFoundError: No file at `path`.
            CheckpointError: The file is unreadable, of another version or (for resuming, or for
                distillation) of another algorithm, or its models have other parameters or shapes than this runner's (a
                checkpoint of another task, network or set of costs).
        """
        state = checkpoint.load(path, map_location=self.device)
        checkpoint.check_batonlab(state, path)
        saved_algorithm, algorithm = state.get("algorithm", "PPO"), self.cfg.algorithm.class_name
        if load_optimizer and saved_algorithm != algorithm:
            raise checkpoint.CheckpointError(
                f"checkpoint {path} was trained with {saved_algorithm}, this run uses {algorithm}: resume it with "
                f"agent.algorithm.class_name={saved_algorithm}")
        if self.distillation != (saved_algorithm == "Distillation"):
            hint = ("an RL checkpoint's actor is a teacher: pass its run as teacher=RUN_DIR" if self.distillation
                    else "load it with agent.algorithm.class_name=Distillation")
            raise checkpoint.CheckpointError(f"checkpoint {path} was trained with {saved_algorithm}, this runner "
                                             f"uses {algorithm}: {hint}")
        current = self.alg.save()
        if self.distillation:
            for model in ("student", "teacher"):
                key = f"{model}_state_dict"
                _check_shapes(path, model, state.get(key, {}), current[key])
            expert = self.cfg.teacher.expert  # a scripted expert has no weights to load
            self.alg.load(state, {"student": True, "teacher": not expert, "optimizer": load_optimizer}, strict=True)
        else:
            same_constrained = self.constrained and saved_algorithm == algorithm
            models = ("actor", "critic", "cost_critic") if same_constrained else ("actor", "critic")
            for model in models:
                key = f"{model}_state_dict"
                _check_shapes(path, model, state.get(key, {}), current[key])
            if same_constrained:
                _check_shapes(path, "constraint", state.get("constraint_state_dict", {}), current["constraint_state_dict"])
            self.alg.load(state, {"actor": True, "critic": True, "optimizer": load_optimizer, "iteration": True,
                                  "cost_critic": same_constrained, "constraint": same_constrained}, strict=True)
        self.iteration = int(state["iter"])
        self.total_env_steps = int(state["total_env_steps"])
        if self.distillation:
            self.alg.num_updates = self.iteration  # DAgger's β continues its fall
        else:
            self.finetuned_from = state.get("finetuned_from")
            if self.finetuned_from:
                freeze_input_normalizer(self.alg.actor)
        # Resuming restores every curriculum; playing or exporting may run a task that drops some.
        self.env.load_training_state(state, strict=load_optimizer)

    def load_teacher(self, path: str | Path) -> None:
        """Load the actor of an RL checkpoint (PPO, P3O, PPOLagrangian) as Distillation's teacher.

        Raises:
            FileNotFoundError: No file at `path`.
            CheckpointError: Not a Distillation runner; the file is unreadable, of another version or
                holds no actor; or the actor does not fit `cfg.teacher` (another task or network).
        """
        if not self.distillation:
            raise checkpoint.CheckpointError(f"a teacher is only loaded by Distillation; this runner uses "
                                             f"{self.cfg.algorithm.class_name}")
        if self.cfg.teacher.expert:
            raise checkpoint.CheckpointError("this runner's teacher is the task's scripted expert; it loads no checkpoint")
        state = checkpoint.load(path, map_location=self.device)
        checkpoint.check_batonlab(state, path, what="teacher checkpoint")
        if "actor_state_dict" not in state:
            raise checkpoint.CheckpointError(f"teacher checkpoint {path} holds no actor (a {state.get('algorithm')} "
                                             "checkpoint); a teacher is the actor of an RL run")
        _check_shapes(path, "teacher", state["actor_state_dict"], self.alg.save()["teacher_state_dict"])
        self.alg.load(state, {"teacher": True}, strict=True)

    def init_from_student(self, student_path: str | Path, critic_path: str | Path | None = None,
                          noise_std: float | None = None) -> bool:
        """Start an RL run's actor from a distillation checkpoint's student (weights, normaliser, frozen from now
        on, and std unless `noise_std` is given), and its critic from an RL checkpoint's critic when one is given and fits.

        Returns:
            Whether the critic was taken from `critic_path` (False: it stays freshly initialised).

        Raises:
            CheckpointError: A distillation runner; the student file is not a distillation checkpoint, or
                its student does not fit this actor.
        """
        if self.distillation:
            raise checkpoint.CheckpointError("a fine-tune starts an RL actor from a student; this runner distils")
        state = checkpoint.load(student_path, map_location=self.device)
        checkpoint.check_batonlab(state, student_path, what="student checkpoint")
        if state.get("algorithm") != "Distillation":
            raise checkpoint.CheckpointError(f"{student_path} is a {state.get('algorithm', 'PPO')} checkpoint, not "
                                             "a distillation's: it has no student")
        current = self.alg.save()
        _check_shapes(student_path, "actor", state["student_state_dict"], current["actor_state_dict"])
        self.alg.actor.load_state_dict(state["student_state_dict"], strict=True)
        if noise_std is not None:
            set_output_std(self.alg.actor, noise_std)
        freeze_input_normalizer(self.alg.actor)
        self.finetuned_from = str(student_path)
        if critic_path is None:
            return False
        teacher = checkpoint.load(critic_path, map_location=self.device)
        saved = teacher.get("critic_state_dict", {})
        fits = set(saved) == set(current["critic_state_dict"]) and all(
            tuple(saved[k].shape) == tuple(v.shape) for k, v in current["critic_state_dict"].items())
        if fits:
            self.alg.critic.load_state_dict(saved, strict=True)
        return fits

    def inference_policy(self):
        """The deterministic actor (mean action), or Distillation's student, in eval mode."""
        self.alg.eval_mode()
        return self.alg.get_policy()


def freeze_input_normalizer(model) -> None:
    """Stop a model's observation normaliser from learning: the student's weights were fitted to its statistics."""
    normalizer = getattr(model, "obs_normalizer", None)
    if normalizer is not None and hasattr(normalizer, "count"):
        normalizer.until = int(normalizer.count)


def output_std(model) -> torch.Tensor:
    """A Gaussian actor's std per output, from its parameters (rsl-rl's `output_std` needs a forward pass first)."""
    distribution = model.distribution
    if getattr(distribution, "std_type", "scalar") == "log":
        return distribution.log_std_param.detach().exp()
    return distribution.std_param.detach()


def set_output_std(model, std: float) -> None:
    """Set a Gaussian actor's std (either of rsl-rl's parameterisations) to `std` for every output."""
    distribution = model.distribution
    with torch.no_grad():
        if getattr(distribution, "std_type", "scalar") == "log":
            distribution.log_std_param.fill_(math.log(std))
        else:
            distribution.std_param.fill_(std)


def _check_shapes(path: str | Path, model: str, saved: dict, current: dict) -> None:
    """Name the first parameter whose name or shape differs between a checkpoint and this model."""
    missing, unexpected = sorted(set(current) - set(saved)), sorted(set(saved) - set(current))
    if missing or unexpected:
        raise checkpoint.CheckpointError(
            f"checkpoint {path} does not fit this {model}: parameters missing {missing}, unexpected {unexpected} "
            "(saved with other policy settings?)")
    for name, tensor in current.items():
        if tuple(saved[name].shape) != tuple(tensor.shape):
            raise checkpoint.CheckpointError(
                f"checkpoint {path} does not fit this {model}: {model}.{name} has shape {list(saved[name].shape)} "
                f"in the checkpoint and {list(tensor.shape)} in this model (a checkpoint of another task or network?)")
