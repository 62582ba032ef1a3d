# SPDX-License-Identifier: BSD-3-Clause
"""Lagrange multipliers of PPOLagrangian: one per cost, stepped once per iteration from the rollout.

The violation of cost k is `delta_k = J_k - d_k` with J_k the rollout's mean cost per control step
and d_k its limit (both per step, see `CostTermCfg.limit`). Two rules:

- "gradient" (dual gradient ascent): `lambda <- clip(lambda + lr * delta, 0, max)`.
- "pid" (Stooke, Achiam, Abbeel 2020, "Responsive Safety in RL by PID Lagrangian Methods", Alg. 2):
  `I <- max(0, I + delta)`, `lambda <- clip(kp * delta + ki * I + kd * max(0, J - J_prev), 0, max)`.
  The integral term alone (kp = kd = 0, ki = lr) is the gradient rule; the proportional term reacts
  to a violation at once and damps the overshoot that the integral alone causes.
"""

from __future__ import annotations

import torch

from batonlab.rl.cfg import ConstraintCfg


class LagrangeMultipliers:
    """Multipliers lambda_k >= 0 (num_costs,) and, for the PID rule, its integral and last cost.

    Args:
        num_costs: Number of constraint costs K.
        cfg: Initial value, rule, learning rate, PID gains and upper bound.
        device: Device of the multipliers (the learner's).
    """

    def __init__(self, num_costs: int, cfg: ConstraintCfg, device: str | torch.device = "cpu"):
        if cfg.multiplier_update not in ("gradient", "pid"):
            raise ValueError(f"multiplier_update={cfg.multiplier_update!r}: expected 'gradient' or 'pid'")
        if not 0.0 <= cfg.multiplier_init <= cfg.multiplier_max:
            raise ValueError(f"multiplier_init={cfg.multiplier_init} must lie in [0, multiplier_max={cfg.multiplier_max}]")
        self.cfg = cfg
        self.value = torch.full((num_costs,), float(cfg.multiplier_init), device=device)
        """lambda_k (num_costs,), the weight of cost k's surrogate in the policy loss."""
        # The PID integral starts where the multiplier starts, so both rules begin at multiplier_init.
        start = cfg.multiplier_init / cfg.pid_ki if cfg.pid_ki > 0 else 0.0
        self.integral = torch.full((num_costs,), float(start), device=device)
        """PID rule: the violations summed over iterations, kept >= 0 (num_costs,)."""
        self.previous_cost = torch.zeros(num_costs, device=device)
        """PID rule: the mean cost per step of the previous update (num_costs,)."""
        self.num_updates = torch.zeros((), dtype=torch.long, device=device)
        """Updates so far (the first has no previous cost, hence no derivative term)."""

    def update(self, mean_cost: torch.Tensor, limits: torch.Tensor) -> torch.Tensor:
        """One step from this rollout's mean cost per step (num_costs,) against the limits (num_costs,).

        Returns the new multipliers (num_costs,).
        """
        cfg = self.cfg
        delta = mean_cost - limits
        if cfg.multiplier_update == "gradient":
            self.value = (self.value + cfg.multiplier_lr * delta).clamp(0.0, cfg.multiplier_max)
        else:
            self.integral = (self.integral + delta).clamp(min=0.0)
            rise = (mean_cost - self.previous_cost).clamp(min=0.0) if self.num_updates > 0 else torch.zeros_like(delta)
            pid = cfg.pid_kp * delta + cfg.pid_ki * self.integral + cfg.pid_kd * rise
            self.value = pid.clamp(0.0, cfg.multiplier_max)
        self.previous_cost = mean_cost.detach().clone()
        self.num_updates += 1
        return self.value

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Copies of the multipliers and the PID rule's state, each (num_costs,) or a scalar."""
        return {"value": self.value.clone(), "integral": self.integral.clone(),
                "previous_cost": self.previous_cost.clone(), "num_updates": self.num_updates.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Restore a `state_dict` of as many costs.

        Raises:
            ValueError: Other keys, or another number of costs.
        """
        current = self.state_dict()
        if set(state) != set(current):
            raise ValueError(f"multiplier state has keys {sorted(state)}, expected {sorted(current)}")
        for key, tensor in current.items():
            if tuple(state[key].shape) != tuple(tensor.shape):
                raise ValueError(f"multiplier state '{key}' has shape {list(state[key].shape)}, "
                                 f"expected {list(tensor.shape)}")
        device = self.value.device
        self.value = state["value"].to(device).clone()
        self.integral = state["integral"].to(device).clone()
        self.previous_cost = state["previous_cost"].to(device).clone()
        self.num_updates = state["num_updates"].to(device).clone()
