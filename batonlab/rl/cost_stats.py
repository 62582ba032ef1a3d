# SPDX-License-Identifier: BSD-3-Clause
"""Per-cost statistics of a rollout for the runner's logs, the same for every algorithm (PPO too)."""

from __future__ import annotations

import torch


class RolloutCostStats:
    """Sums of the env's constraint costs over a rollout; `stats` turns them into `Cost/<name>/...` scalars.

    With no costs (K = 0) it records nothing and reports nothing, so the runner needs no special case.

    Args:
        names: The env's cost names (`cost_manager.names`), K of them.
        device: Device of the env's cost tensors.
    """

    def __init__(self, names: list[str], device: str | torch.device):
        self.names = list(names)
        self._sum = torch.zeros(len(self.names), device=device)
        self._violations = torch.zeros(len(self.names), device=device)
        self._steps = 0

    def record(self, costs: torch.Tensor) -> None:
        """Add one env step's costs (num_envs, K); no device sync."""
        if not self.names:
            return
        self._sum += costs.sum(dim=0)
        self._violations += (costs > 0).sum(dim=0)
        self._steps += costs.shape[0]

    def stats(self, limits: torch.Tensor, episode_stats: dict[str, float],
              constraint_stats: dict[str, torch.Tensor]) -> dict[str, float]:
        """The scalars of the rollout since the last call, which also starts the next rollout.

        Args:
            limits: The allowed mean cost per step of each cost (K,).
            episode_stats: The iteration's episode logs; `Episode_Cost/<name>` is the mean episode sum.
            constraint_stats: The algorithm's per-cost values (`{"multiplier": (K,)}` or `{"penalty": (K,)}`).

        Returns `Cost/<name>/{episode_cost, mean_cost, limit, violation_rate}` and one
        `Cost/<name>/<key>` per entry of `constraint_stats`.
        """
        if not self.names:
            return {}
        steps = max(self._steps, 1)
        columns = {"mean_cost": self._sum / steps, "limit": limits, "violation_rate": self._violations / steps,
                   **constraint_stats}
        values = {key: torch.as_tensor(v).detach().float().cpu().reshape(-1).tolist() for key, v in columns.items()}
        out = {}
        for k, name in enumerate(self.names):
            if f"Episode_Cost/{name}" in episode_stats:
                out[f"Cost/{name}/episode_cost"] = episode_stats[f"Episode_Cost/{name}"]
            out.update({f"Cost/{name}/{key}": column[k] for key, column in values.items()})
        self._sum.zero_()
        self._violations.zero_()
        self._steps = 0
        return out
