# SPDX-License-Identifier: BSD-3-Clause
"""Level curriculum (legged_gym style): each env is promoted to a harder terrain level when it tracks
its command well, and demoted when it fails.

At every reset, an env's finished episode is judged from its command's metrics
(`BaseVelocityCommand.metrics`): distance travelled along the commanded direction vs. distance
commanded. Envs that pass the last level restart on a random level, so the hardest levels stay
populated without being the only ones trained on. The levels live on `env.terrain`; reset events
spawn each env on its tile.
"""

from __future__ import annotations

import torch
from batonlab.env.terms import CurriculumTerm


def level_changes(
    distance_traveled: torch.Tensor,
    distance_commanded: torch.Tensor,
    failed: torch.Tensor,
    promote_fraction: float = 0.5,
    demote_fraction: float = 0.25,
    min_commanded_distance: float = 0.5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The promotion rule on per-episode statistics.

    Args:
        distance_traveled: (n,) distance covered along the commanded direction [m].
        distance_commanded: (n,) distance the command asked for [m].
        failed: (n,) bool, the episode ended with a failure (fall, illegal contact).
        promote_fraction: promote when at least this fraction of the commanded distance was covered.
        demote_fraction: demote when less than this fraction was covered.
        min_commanded_distance: episodes that asked for less than this say nothing about tracking
            (standing commands); they only move down on failure [m].

    Returns:
        move_up, move_down: (n,) bool, never both true.
    """
    informative = distance_commanded >= min_commanded_distance
    move_up = informative & ~failed & (distance_traveled >= promote_fraction * distance_commanded)
    move_down = (failed | (informative & (distance_traveled < demote_fraction * distance_commanded))) & ~move_up
    return move_up, move_down


class TerrainLevels(CurriculumTerm):
    """Curriculum term moving envs between terrain levels by how well they tracked their command.

    Args:
        env: The env (needs a `BaseVelocityCommand`-like command with `metrics` and `env.terrain`).
        command: Name of the velocity command whose metrics judge the episode.
        promote_fraction, demote_fraction, min_commanded_distance: see `level_changes`.
    """

    def __init__(
        self,
        env,
        command: str = "base_velocity",
        promote_fraction: float = 0.5,
        demote_fraction: float = 0.25,
        min_commanded_distance: float = 0.5,
    ):
        if not 0.0 <= demote_fraction <= promote_fraction:
            raise ValueError(f"need 0 <= demote_fraction <= promote_fraction, got {demote_fraction}, {promote_fraction}")
        self.command = command
        self.promote_fraction = promote_fraction
        self.demote_fraction = demote_fraction
        self.min_commanded_distance = min_commanded_distance
        self.terrain = env.terrain
        self._metrics = env.command_manager.terms[command].metrics

    def __call__(self, env, env_ids: torch.Tensor) -> dict[str, float]:
        # Envs reset before they took a step (a full `reset()`) have no episode to judge.
        judged = env_ids[self._metrics["time"][env_ids] > 0]
        move_up, move_down = level_changes(
            self._metrics["distance_traveled"][judged],
            self._metrics["distance_commanded"][judged],
            env.termination_manager.terminated[judged],
            self.promote_fraction,
            self.demote_fraction,
            self.min_commanded_distance,
        )
        self.terrain.update_levels(judged, move_up, move_down)
        n = max(1, len(judged))
        return {
            "mean_level": self.terrain.levels.float().mean().item(),
            "max_level": self.terrain.levels.max().item(),
            "promoted": move_up.sum().item() / n,
            "demoted": move_down.sum().item() / n,
        }

    def state_dict(self) -> dict:
        """The term's state for a checkpoint: the terrain's."""
        return {"terrain": self.terrain.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        """Restore the terrain's state."""
        self.terrain.load_state_dict(state["terrain"])
