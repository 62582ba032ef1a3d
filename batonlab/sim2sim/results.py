# SPDX-License-Identifier: BSD-3-Clause
"""`sim_robot_node`'s results file: the summary of the episodes done so far, replaced whole after each one.

A run stopped (or killed) between two episodes leaves the summary of those it finished; a reader never
sees half a file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from batonlab.env.episodes import summarize_episodes
from batonlab.utils.files import atomic_write_text


def summarize(task: str, seed: int, lockstep: bool, episodes: list[dict]) -> dict:
    """The run's summary over `episodes` (the ~/episode entries, at least one); `num_episodes` counts them."""
    errors = [e["mean_speed_error"] for e in episodes if e["mean_speed_error"] is not None]
    delays = [e["command_delay_steps"] for e in episodes if e["command_delay_steps"] is not None]
    outcome = summarize_episodes([e["success"] for e in episodes], [e["terminated"] for e in episodes],
                                 {key: [e["mean_errors"][key] for e in episodes] for key in episodes[0]["mean_errors"]})
    return {"task": task, "seed": seed, "num_episodes": outcome.num_episodes,
            "success_rate": outcome.success_rate, "survival_rate": outcome.survival_rate,
            "policy_stops": sum(e["policy_stop"] is not None for e in episodes),
            "lockstep": lockstep,
            "command_delay_steps": float(np.mean(delays)) if delays else None,
            "late_commands": sum(e["late_commands"] for e in episodes),
            "lockstep_timeouts": sum(e["lockstep_timeouts"] for e in episodes),
            "mean_speed_error": float(np.mean(errors)) if errors else None,
            "mean_errors": outcome.mean_errors,
            "episodes": list(episodes)}


def write_results(path: Path, summary: dict) -> None:
    """`summary` as JSON at `path`, atomically (`batonlab.utils.files`)."""
    atomic_write_text(path, json.dumps(summary, indent=2))
