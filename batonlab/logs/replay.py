# SPDX-License-Identifier: BSD-3-Clause
"""Replaying a bag in simulation: open-loop, state playback, policy re-evaluation.

One import for the three replay modes (`batonlab replay`, the report, tests); each lives in its own
module:

- `replay_env`: the replay simulator, one world of the bag's task with the logged, nominal or
  randomised physics, and the logged joint states / markers written into it.
- `open_loop`: `replay_open_loop` drives that world with the logged joint commands from the logged
  state (a floating base from the logged odometry, `logged_base`) and returns an `OpenLoopResult`
  (`open_loop_result`: simulated vs. logged joints, base drift vs. odometry).
- `playback`: `playback_frames` / `write_playback` set the logged joint states kinematically and
  render them.
- `reevaluate`: `reevaluate_policy` feeds the logged observations to an exported policy, run as the
  robot runs it (`batonlab.deploy.policy.OnnxPolicy`), and compares its actions with the logged ones.
"""

from __future__ import annotations

from batonlab.logs.open_loop import replay_open_loop
from batonlab.logs.open_loop_result import OpenLoopResult
from batonlab.logs.playback import playback_frames, write_playback
from batonlab.logs.reevaluate import PolicyEvalResult, reevaluate_policy
from batonlab.logs.replay_env import PHYSICS_MODES, logged_qpos, logged_qvel, make_replay_env, set_markers, task_of

__all__ = [
    "PHYSICS_MODES",
    "OpenLoopResult",
    "PolicyEvalResult",
    "logged_qpos",
    "logged_qvel",
    "make_replay_env",
    "playback_frames",
    "reevaluate_policy",
    "replay_open_loop",
    "set_markers",
    "task_of",
    "write_playback",
]
