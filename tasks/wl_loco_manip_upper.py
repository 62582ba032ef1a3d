# SPDX-License-Identifier: BSD-3-Clause
"""`wl_loco_manip_upper`: `wl_loco_manip_pose` with half of its episodes driven by recorded upper-level commands (the
base velocities and tool poses the wheel-legged tasks' experts issue, step by step: held, changing every step, slow
approaches, turns in place, the tool held close and low), the other half by the pose task's own draws. The whole-body
policy it trains is a lower level for `wl_door`, `wl_baton` and `wl_chase` (same joints, observations and ONNX
layout as the pose task's).

    python scripts/record_upper_commands.py --out build/upper_commands.npz
    batonlab train task=wl_loco_manip_upper env.events.upper_commands.params.file=build/upper_commands.npz
"""

from __future__ import annotations

from batonlab import events
from batonlab.env.cfg import EventTermCfg, TaskCfg
from batonlab.tasks import register
from batonlab.tasks.mobile_robot import COMMAND
from batonlab.tasks.wl_loco_manip import EE_COMMAND, make_wl_loco_manip_agent_cfg, make_wl_loco_manip_pose_cfg

RECORDED_FRACTION = 0.5
"""The share of episodes that play recorded commands."""


def make_wl_loco_manip_upper_cfg(play: bool = False, file: str | None = None) -> TaskCfg:
    """`wl_loco_manip_pose` with `RECORDED_FRACTION` of its episodes playing the command recording `file`; `play` (and
    the export) is the pose task's, so that a run plays and exports without its recording."""
    cfg = make_wl_loco_manip_pose_cfg(play)
    if play:
        return cfg
    cfg.events["upper_commands"] = EventTermCfg(func=events.PlayRecordedCommands, mode="reset", params={
        "file": file, "fraction": RECORDED_FRACTION, "base_command": COMMAND, "ee_command": EE_COMMAND})
    cfg.events["play_upper_commands"] = EventTermCfg(func=events.play_recorded_commands, mode="interval",
                                                     interval_range_s=(0.0, 0.0), params={"event": "upper_commands"})
    return cfg


register("wl_loco_manip_upper", make_wl_loco_manip_upper_cfg, make_wl_loco_manip_agent_cfg,
         "wl_loco_manip_pose, half its episodes on recorded upper-level commands (file=...): a lower level for the wl tasks")
