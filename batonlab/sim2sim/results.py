# SPDX-License-Identifier: BSD-3-Clause
"""The sim robot's episode bookkeeping and its results file, replaced whole after each episode.

A run stopped (or killed) between two episodes leaves the summary of those it finished; a reader never
sees half a file.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from batonlab.env.episodes import summarize_episodes
from batonlab.utils.files import atomic_write_text


class EpisodeLog:
    """What a sim robot keeps over a run, whatever carries its messages: each episode's command timing, stops and
    outcome (the ~/episode entries), and the run's summary."""

    def __init__(self, task: str, seed: int, lockstep: bool):
        self.task, self.seed, self.lockstep = task, seed, lockstep
        self.entries: list[dict] = []
        """One entry per finished episode, in order."""
        self.commands_received = 0
        """Joint commands applied since the run started."""
        self._delays: list[int] = []
        self._lockstep_timeouts = 0
        self._policy_stop: str | None = None

    def command_applied(self) -> None:
        """Count one applied joint command."""
        self.commands_received += 1

    def period_commanded(self, delay_steps: int) -> None:
        """A control period's commands all arrived, `delay_steps` physics steps after its state went out."""
        self._delays.append(int(delay_steps))

    def lockstep_timed_out(self) -> int:
        """Count a lockstep wait that ran out; how many ran out this episode."""
        self._lockstep_timeouts += 1
        return self._lockstep_timeouts

    def policy_stopped(self, reason: str) -> None:
        """The followed policy stopped during the episode (the first reason is kept)."""
        self._policy_stop = self._policy_stop or reason

    def restart_episode(self) -> None:
        """Forget the current episode's timing and stops (the warm-up's are not episode 0's)."""
        self._delays, self._lockstep_timeouts, self._policy_stop = [], 0, None

    def end_episode(self, result, policy_stop: str | None = None) -> dict:
        """The entry of a finished episode (`batonlab.sim2sim.robot.EpisodeResult`), appended; the next starts afresh.

        Args:
            policy_stop: Why the policy is stopped now, if it is (used when no stop was seen during the episode).
        """
        delays = np.asarray(self._delays)
        entry = {"episode": result.index, "seed": result.seed, "success": result.success, "length": result.length,
                 "terminated": result.terminated, "final_distance": result.final_distance,
                 "mean_speed_error": result.mean_speed_error, "mean_errors": result.mean_errors,
                 "commands_received": self.commands_received,
                 "policy_stop": self._policy_stop or policy_stop,
                 "command_delay_steps": float(delays.mean()) if delays.size else None,
                 "late_commands": int(np.count_nonzero(delays > 0)),
                 "lockstep_timeouts": self._lockstep_timeouts}
        self.entries.append(entry)
        self.restart_episode()
        return entry

    def summary(self) -> dict:
        """The run's summary over the finished episodes (at least one)."""
        return summarize(self.task, self.seed, self.lockstep, self.entries)


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
