# SPDX-License-Identifier: BSD-3-Clause
"""What a set of finished episodes amounts to: the one summary play, evaluation and the sim robot report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np


@dataclass(frozen=True)
class EpisodeSummary:
    """Rates and mean errors over finished episodes."""

    num_episodes: int
    success_rate: float
    survival_rate: float
    """Share of episodes that ran to their time limit rather than ending on a failure term."""
    mean_errors: dict[str, float] = field(default_factory=dict)
    """Mean of each episode's mean tracking error per command metric (`ee_target/ee_error` [m], ...)."""
    mean_return: float | None = None
    """Mean undiscounted return; None where no reward was computed (the sim robot)."""

    def as_dict(self) -> dict:
        """The summary as plain JSON-ready values."""
        return asdict(self)


def summarize_episodes(successes: Sequence[bool], terminated: Sequence[bool],
                       mean_errors: Mapping[str, Sequence[float]] | None = None,
                       returns: Sequence[float] | None = None) -> EpisodeSummary:
    """Summary of episodes given per-episode success, failure-ending, mean errors and returns (at least one)."""
    successes, terminated = np.asarray(successes, dtype=bool), np.asarray(terminated, dtype=bool)
    if successes.size == 0 or successes.shape != terminated.shape:
        raise ValueError(f"need one success and one termination flag per episode, got {successes.shape} and "
                         f"{terminated.shape}")
    return EpisodeSummary(
        num_episodes=int(successes.size),
        success_rate=float(successes.mean()),
        survival_rate=float(1.0 - terminated.mean()),
        mean_errors={key: float(np.mean(values)) for key, values in (mean_errors or {}).items()},
        mean_return=None if returns is None else float(np.mean(returns)),
    )
