# SPDX-License-Identifier: BSD-3-Clause
"""Constrained PPO on top of rsl-rl's PPO: a multi-head cost critic, cost GAE, and P3O or PPO-Lagrangian.

Design and contract notes: docs/modules/batonlab.rl.constrained.md.
"""

from __future__ import annotations

import abc
from itertools import chain

import torch
import torch.nn as nn
from rsl_rl.algorithms import PPO
from rsl_rl.models import MLPModel
from rsl_rl.utils import compile_model, reduce_gradients_in_buckets

from batonlab.rl.cfg import ConstraintCfg
from batonlab.rl.cost_storage import CostStorage, mini_batches
from batonlab.rl.multipliers import LagrangeMultipliers


def clipped_cost_surrogate(ratio: torch.Tensor, cost_advantages: torch.Tensor, clip_param: float) -> torch.Tensor:
    """L_Ck = mean over the batch of max(ratio * A_Ck, clip(ratio) * A_Ck), per cost.

    Args:
        ratio: pi_new(a|s) / pi_old(a|s) (batch,).
        cost_advantages: Centred cost advantages (batch, K) [cost units].

    Returns (K,): the pessimistic (largest) estimate of the cost's change, to be minimised.
    """
    ratio = ratio.unsqueeze(-1)
    clipped = ratio.clamp(1.0 - clip_param, 1.0 + clip_param)
    return torch.max(ratio * cost_advantages, clipped * cost_advantages).mean(dim=0)


def p3o_penalty(cost_surrogate: torch.Tensor, mean_cost: torch.Tensor, limits: torch.Tensor, kappa: float) -> torch.Tensor:
    """P3O's per-cost penalty kappa * max(0, L_Ck + mean_cost_k - limit_k) (K,), exactly 0 where a limit holds."""
    return kappa * torch.relu(cost_surrogate + mean_cost - limits)


def lagrangian_policy_loss(surrogate_loss: torch.Tensor, cost_surrogate: torch.Tensor,
                           multipliers: torch.Tensor) -> torch.Tensor:
    """(L_R + sum_k lambda_k L_Ck) / (1 + sum_k lambda_k), with the multipliers held constant."""
    multipliers = multipliers.detach()
    return (surrogate_loss + (multipliers * cost_surrogate).sum()) / (1.0 + multipliers.sum())


class ConstrainedPPO(PPO, abc.ABC):
    """rsl-rl's PPO plus a cost critic, cost GAE and a constraint term in the policy loss.

    Subclasses define the constraint term (`_policy_loss`) and may step state before the update
    (`_before_update`). The limits come from the runner every iteration (`set_cost_limits`), since
    curricula may move them.

    Args (beyond rsl-rl PPO's):
        num_costs: Number of costs K (the env's `cost_manager.names`).
        cost_critic_cfg: `MLPModel` settings of the cost critic (the critic's hidden dims, activation,
            normalisation); it reads the critic's observation set and outputs K values.
        constraint_cfg: The fields of `ConstraintCfg`.
    """

    def __init__(self, actor: MLPModel, critic: MLPModel, storage, *, num_costs: int, cost_critic_cfg: dict,
                 constraint_cfg: dict, **ppo_kwargs):
        name = type(self).__name__
        if num_costs < 1:
            raise ValueError(f"{name} needs at least one constraint cost; the task's `costs` is empty")
        if actor.is_recurrent or critic.is_recurrent:
            raise ValueError(f"{name} supports feed-forward (MLP) actors and critics only, not recurrent ones")
        if ppo_kwargs.get("rnd_cfg"):
            raise ValueError(f"{name} does not support RND (random network distillation); use PPO for it")
        if ppo_kwargs.get("symmetry_cfg"):
            raise ValueError(f"{name} does not support symmetry augmentation; use PPO for it")
        super().__init__(actor, critic, storage, **ppo_kwargs)
        self.constraint = ConstraintCfg(**constraint_cfg)
        self.num_costs = num_costs
        # The storage's first step is a TensorDict of the env's observation groups with their shapes.
        obs = storage.observations[0]
        self.cost_critic: MLPModel = MLPModel(obs, {"cost_critic": list(critic.obs_groups)}, "cost_critic", num_costs,
                                              **cost_critic_cfg).to(self.device)
        self._raw_cost_critic = self.cost_critic
        self.optimizer.add_param_group({"params": list(self.cost_critic.parameters())})
        self.cost_storage = CostStorage(storage.num_transitions_per_env, storage.num_envs, num_costs, self.device)
        self.limits: torch.Tensor | None = None
        """Allowed mean cost per step (K,), set by `set_cost_limits` before each update."""
        self.mean_cost = torch.zeros(num_costs, device=self.device)
        """Mean cost per step of the last rollout (K,), averaged over all ranks."""
        self.constraint_term = torch.zeros(num_costs, device=self.device)
        """Each cost's term in the policy loss (`_policy_loss`), averaged over the last update's mini-batches (K,)."""
        self._cost_values: torch.Tensor | None = None

    # Rollout.

    def act(self, obs):
        """rsl-rl's actions (N, num_actions), also recording the cost critic's values (N, K) for this step."""
        actions = super().act(obs)
        self._cost_values = self.cost_critic(obs).detach()
        return actions

    def process_env_step(self, obs, rewards, dones, extras) -> None:
        """Record the step's costs (`extras["costs"]`, (N, K)) next to rsl-rl's transition."""
        if "costs" not in extras:
            raise KeyError(f"{type(self).__name__} needs extras['costs'] (num_envs, num_costs) from the env step")
        time_outs = extras.get("time_outs")
        self.cost_storage.add(extras["costs"].to(self.device), self._cost_values,
                              None if time_outs is None else time_outs.to(self.device))
        super().process_env_step(obs, rewards, dones, extras)

    def compute_returns(self, obs) -> None:
        """rsl-rl's reward returns plus the cost GAE returns, bootstrapped from the cost critic at `obs`."""
        super().compute_returns(obs)
        last_values = self.cost_critic(obs).detach()
        self.cost_storage.compute_returns(last_values, self.storage.dones, self.gamma, self.lam)

    def set_cost_limits(self, limits: torch.Tensor) -> None:
        """The allowed mean cost per step of each cost (K,) for the next update."""
        limits = torch.as_tensor(limits, dtype=torch.float32, device=self.device).reshape(-1)
        if limits.numel() != self.num_costs:
            raise ValueError(f"{limits.numel()} cost limits for {self.num_costs} costs")
        self.limits = limits.clone()

    # Update.

    def update(self) -> dict[str, float]:
        """PPO's epochs over mini-batches with the cost critic's loss and the constraint term added.

        Returns the mean losses: rsl-rl's `value`, `surrogate`, `entropy`, plus `cost_value` and
        `constraint` (the per-cost constraint terms of `_policy_loss`, summed).
        """
        if self.limits is None:
            raise RuntimeError(f"{type(self).__name__}.update needs the cost limits: call set_cost_limits first")
        self.mean_cost = self._rollout_mean_cost()
        self._before_update()
        sums = dict.fromkeys(("value", "surrogate", "entropy", "cost_value", "constraint"), 0.0)
        per_cost = torch.zeros(self.num_costs, device=self.device)
        device_type = torch.device(self.device).type
        for batch, cost_batch in mini_batches(self.storage, self.cost_storage, self.num_mini_batches,
                                              self.num_learning_epochs):
            if self.normalize_advantage_per_mini_batch:
                with torch.no_grad():
                    batch.advantages = (batch.advantages - batch.advantages.mean()) / (batch.advantages.std() + 1e-8)
            with torch.amp.autocast(device_type=device_type, enabled=self.use_mixed_precision, dtype=torch.bfloat16):
                self.actor(batch.observations, stochastic_output=True)
                log_prob = self.actor.get_output_log_prob(batch.actions)
                values = self.critic(batch.observations)
                cost_values = self.cost_critic(batch.observations)
                entropy = self.actor.output_entropy.mean()
                self._adapt_learning_rate(batch.old_distribution_params, self.actor.output_distribution_params)

                ratio = torch.exp(log_prob - batch.old_actions_log_prob.squeeze(-1))
                advantages = batch.advantages.squeeze(-1)
                surrogate_loss = torch.max(-advantages * ratio,
                                           -advantages * ratio.clamp(1.0 - self.clip_param, 1.0 + self.clip_param)).mean()
                value_loss = self._value_losses(values, batch.values, batch.returns).mean()
                # Not clipped: clip_param (in value units) suits rewards scaled by the step time, while the
                # discounted sum of an indicator cost reaches 1 / (1 - gamma); clipped, the cost critic could
                # move only clip_param per iteration.
                cost_value_loss = (cost_values - cost_batch.returns).pow(2).mean(dim=0).sum()
                cost_surrogate = clipped_cost_surrogate(ratio, cost_batch.advantages, self.clip_param)
                policy_loss, per_cost_term = self._policy_loss(surrogate_loss, cost_surrogate)
                loss = (policy_loss + self.value_loss_coef * value_loss
                        + self.constraint.cost_value_loss_coef * cost_value_loss - self.entropy_coef * entropy)

            self.optimizer.zero_grad()
            loss.backward()
            if self.is_multi_gpu:
                self.reduce_parameters()
            for model in (self.actor, self.critic, self.cost_critic):
                nn.utils.clip_grad_norm_(model.parameters(), self.max_grad_norm)
            self.optimizer.step()

            sums["value"] += value_loss.item()
            sums["surrogate"] += surrogate_loss.item()
            sums["entropy"] += entropy.item()
            sums["cost_value"] += cost_value_loss.item()
            sums["constraint"] += per_cost_term.sum().item()
            per_cost += per_cost_term.detach().float()

        obs = self.storage.observations.flatten(0, 1)
        for model in (self.actor, self.critic, self.cost_critic):
            model.update_normalization(obs)
        num_updates = self.num_learning_epochs * self.num_mini_batches
        self.constraint_term = per_cost / num_updates
        self.storage.clear()
        self.cost_storage.clear()
        return {k: v / num_updates for k, v in sums.items()}

    def _rollout_mean_cost(self) -> torch.Tensor:
        """Mean cost per step of this rollout (K,); under torchrun the mean over all ranks."""
        mean_cost = self.cost_storage.mean_cost().clone()
        if self.is_multi_gpu:
            torch.distributed.all_reduce(mean_cost, op=torch.distributed.ReduceOp.SUM)
            mean_cost /= self.gpu_world_size
        return mean_cost

    def _value_losses(self, values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
        """Element-wise (clipped) squared value errors, as rsl-rl's PPO computes them."""
        if not self.use_clipped_value_loss:
            return (returns - values).pow(2)
        clipped = old_values + (values - old_values).clamp(-self.clip_param, self.clip_param)
        return torch.max((values - returns).pow(2), (clipped - returns).pow(2))

    def _adapt_learning_rate(self, old_params: tuple[torch.Tensor, ...], new_params: tuple[torch.Tensor, ...]) -> None:
        """rsl-rl's adaptive schedule: shrink the step when the KL exceeds 2x the target, grow it below 1/2."""
        if self.desired_kl is None or self.schedule != "adaptive":
            return
        with torch.inference_mode():
            kl_mean = torch.mean(self.actor.get_kl_divergence(old_params, new_params))
            if self.is_multi_gpu:
                torch.distributed.all_reduce(kl_mean, op=torch.distributed.ReduceOp.SUM)
                kl_mean /= self.gpu_world_size
            if self.gpu_global_rank == 0:
                if kl_mean > self.desired_kl * 2.0:
                    self.learning_rate = max(1e-5, self.learning_rate / 1.5)
                elif 0.0 < kl_mean < self.desired_kl / 2.0:
                    self.learning_rate = min(1e-2, self.learning_rate * 1.5)
            if self.is_multi_gpu:
                lr = torch.tensor(self.learning_rate, device=self.device)
                torch.distributed.broadcast(lr, src=0)
                self.learning_rate = lr.item()
            for group in self.optimizer.param_groups:
                group["lr"] = self.learning_rate

    # The constraint, per algorithm.

    def _before_update(self) -> None:
        """Called once per update with `mean_cost` and `limits` set, before the first mini-batch."""

    @abc.abstractmethod
    def _policy_loss(self, surrogate_loss: torch.Tensor, cost_surrogate: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The policy loss from PPO's clipped surrogate (scalar) and the cost surrogates (K,).

        Returns the loss and its per-cost constraint term (K,) for logging.
        """

    @abc.abstractmethod
    def constraint_stats(self) -> dict[str, torch.Tensor]:
        """Per-cost quantities to log (name -> (K,)), e.g. `{"multiplier": ...}`."""

    def _constraint_state(self) -> dict[str, torch.Tensor]:
        """Tensors a resumed run needs besides the models (multipliers, PID state)."""
        return {}

    def _load_constraint_state(self, state: dict[str, torch.Tensor]) -> None:
        if state:
            raise ValueError(f"{type(self).__name__} keeps no constraint state, the checkpoint has {sorted(state)}")

    # Models, checkpoints, multi-GPU.

    def train_mode(self) -> None:
        """Put the actor, critic and cost critic in training mode."""
        super().train_mode()
        self.cost_critic.train()

    def eval_mode(self) -> None:
        """Put the actor, critic and cost critic in evaluation mode."""
        super().eval_mode()
        self.cost_critic.eval()

    def save(self) -> dict:
        """rsl-rl's dict plus `cost_critic_state_dict` and `constraint_state_dict`."""
        state = super().save()
        state["cost_critic_state_dict"] = self._raw_cost_critic.state_dict()
        state["constraint_state_dict"] = self._constraint_state()
        return state

    def load(self, loaded_dict: dict, load_cfg: dict | None, strict: bool) -> bool:
        """rsl-rl's load, plus the cost critic (`load_cfg["cost_critic"]`) and the multipliers
        (`load_cfg["constraint"]`); both default to True like rsl-rl's entries."""
        load_cfg = load_cfg or {"actor": True, "critic": True, "optimizer": True, "iteration": True}
        load_iteration = super().load(loaded_dict, load_cfg, strict)
        if load_cfg.get("cost_critic", True):
            self._raw_cost_critic.load_state_dict(loaded_dict["cost_critic_state_dict"], strict=strict)
        if load_cfg.get("constraint", True):
            self._load_constraint_state(loaded_dict["constraint_state_dict"])
        return load_iteration

    def compile(self, mode: str | None = None) -> None:
        """torch.compile the actor, critic and cost critic with `mode`."""
        super().compile(mode)
        self.cost_critic = compile_model(self._raw_cost_critic, mode)

    def broadcast_parameters(self) -> None:
        """Copy rank 0's actor, critic and cost critic parameters to every rank."""
        super().broadcast_parameters()
        for tensor in self._raw_cost_critic.state_dict().values():
            torch.distributed.broadcast(tensor, src=0)

    def reduce_parameters(self) -> None:
        """Average the gradients of the actor, critic and cost critic across ranks."""
        params = chain(self.actor.parameters(), self.critic.parameters(), self.cost_critic.parameters())
        reduce_gradients_in_buckets(params, self.gpu_world_size, self.grad_reduce_bucket_mb)


class P3O(ConstrainedPPO):
    """Penalized PPO: `L_R + kappa * sum_k max(0, L_Ck + mean_cost_k - limit_k)` (docs/modules/batonlab.rl.constrained.md)."""

    def _policy_loss(self, surrogate_loss, cost_surrogate):
        penalty = p3o_penalty(cost_surrogate, self.mean_cost, self.limits, self.constraint.penalty_coef)
        return surrogate_loss + penalty.sum(), penalty

    def constraint_stats(self) -> dict[str, torch.Tensor]:
        """The penalty of each cost in the loss, averaged over the last update's mini-batches."""
        return {"penalty": self.constraint_term}


class PPOLagrangian(ConstrainedPPO):
    """PPO with Lagrange multipliers: `(L_R + sum_k lambda_k L_Ck) / (1 + sum_k lambda_k)`.

    The multipliers step once per iteration, before the policy update, from the rollout's mean cost
    per step against the limit (`ConstraintCfg.multiplier_update`: "gradient" or "pid").
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.multipliers = LagrangeMultipliers(self.num_costs, self.constraint, self.device)

    def _before_update(self) -> None:
        self.multipliers.update(self.mean_cost, self.limits)

    def _policy_loss(self, surrogate_loss, cost_surrogate):
        loss = lagrangian_policy_loss(surrogate_loss, cost_surrogate, self.multipliers.value)
        return loss, self.multipliers.value * cost_surrogate.detach()

    def constraint_stats(self) -> dict[str, torch.Tensor]:
        """The multipliers the last update used."""
        return {"multiplier": self.multipliers.value}

    def _constraint_state(self) -> dict[str, torch.Tensor]:
        return self.multipliers.state_dict()

    def _load_constraint_state(self, state: dict[str, torch.Tensor]) -> None:
        self.multipliers.load_state_dict(state)
