# SPDX-License-Identifier: BSD-3-Clause
"""The sim robot's episode bookkeeping without a transport: command timing, stops and outcomes per episode."""

from __future__ import annotations

import json

from batonlab.sim2sim.results import EpisodeLog, write_results
from batonlab.sim2sim.robot import EpisodeResult


def _result(index: int, success: bool, terminated: bool = False) -> EpisodeResult:
    return EpisodeResult(index=index, seed=100 + index, success=success, length=50, terminated=terminated,
                         final_distance=0.01, mean_speed_error=0.2 if index else None,
                         mean_errors={"ee_target/ee_error": 0.02 * (index + 1)})


def test_each_episode_keeps_its_own_timing_and_stops_and_the_summary_counts_them(tmp_path):
    log = EpisodeLog("arm_reach", seed=7, lockstep=True)
    log.period_commanded(3)  # the warm-up's figures are dropped at episode 0's start
    log.lockstep_timed_out()
    log.restart_episode()
    for delay in (0, 0, 2):
        log.command_applied()
        log.period_commanded(delay)
    assert log.lockstep_timed_out() == 1
    log.policy_stopped("stale joint_states")
    log.policy_stopped("a later reason")
    first = log.end_episode(_result(0, success=False, terminated=True))
    assert first["command_delay_steps"] == 2 / 3 and first["late_commands"] == 1 and first["lockstep_timeouts"] == 1
    assert first["policy_stop"] == "stale joint_states" and first["commands_received"] == 3
    second = log.end_episode(_result(1, success=True), policy_stop="still stopped")
    assert second["command_delay_steps"] is None and second["late_commands"] == 0 and second["lockstep_timeouts"] == 0
    assert second["policy_stop"] == "still stopped"

    summary = log.summary()
    assert summary["num_episodes"] == 2 and summary["success_rate"] == 0.5 and summary["survival_rate"] == 0.5
    assert summary["policy_stops"] == 2 and summary["late_commands"] == 1 and summary["lockstep_timeouts"] == 1
    assert summary["mean_speed_error"] == 0.2 and summary["episodes"] == [first, second]
    path = tmp_path / "results.json"
    write_results(path, summary)
    assert json.loads(path.read_text()) == json.loads(json.dumps(summary))
