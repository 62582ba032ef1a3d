# SPDX-License-Identifier: BSD-3-Clause
"""`wl_chase`: the object (`wl_baton`'s baton, standing in the cup of a carrier that moves over the ground) starts
1.2-2 m away, anywhere within 60° of the robot's heading, and flees: up to 0.35 m/s in a direction drawn per episode,
swerving every 1-3 s. The wheel-legged robot with arm6 chases it down and catches it: success is the object taken
(in the hand, both pads touching it, out of the cup) and still held at the end of the episode.

Everything else (actions, observations, the expert) is `wl_baton`'s: catching is taking from a carrier that does not
wait, and does not go where the robot expects.
"""

from __future__ import annotations

from batonlab import events
from batonlab.env.cfg import EventTermCfg, TaskCfg
from batonlab.rl.cfg import RunnerCfg
from batonlab.tasks import register
from batonlab.tasks.wl_baton import make_wl_baton_cfg
from batonlab.tasks.wl_door import make_command_layer_agent_cfg

SWERVE_RATE = (-0.6, 0.6)
"""The carrier's turn rate, redrawn every 1-3 s [rad/s]."""


def make_wl_chase_cfg(play: bool = False, export: str | None = None, scripted: bool = False) -> TaskCfg:
    """`wl_chase` over the trained whole-body policy's `export` (or `scripted`)."""
    cfg = make_wl_baton_cfg(play, export, scripted)
    cfg.events["holder"].params.update(distance_range=(1.5, 2.5), lateral_range=(0.0, 0.0), bearing_range=(-1.05, 1.05),
                                       heading_range=(-1.0, 1.0), speed_range=(0.15, 0.4), turn_rate_range=SWERVE_RATE)
    cfg.events["swerve"] = EventTermCfg(func=events.redraw_holder_turn, mode="interval", interval_range_s=(1.0, 3.0),
                                        params={"event": "holder", "turn_rate_range": SWERVE_RATE})
    cfg.rewards.pop("follow")
    cfg.success.params["follow_range"] = (0.0, float("inf"))  # caught and held; where the carrier goes is its own affair
    return cfg


def make_wl_chase_scripted_cfg(play: bool = False) -> TaskCfg:
    """`wl_chase` with the scripted stand-in for the whole-body policy (the expert's and the tests' variant)."""
    return make_wl_chase_cfg(play, scripted=True)


def make_wl_chase_agent_cfg() -> RunnerCfg:
    """The command layer's PPO (`make_command_layer_agent_cfg`), logged under `wl_chase`."""
    return make_command_layer_agent_cfg("wl_chase")


register("wl_chase", make_wl_chase_cfg, make_wl_chase_agent_cfg,
         "wheel-legged robot with arm chases an object carried away over the ground and catches it (export=...)")
register("wl_chase_scripted", make_wl_chase_scripted_cfg, make_wl_chase_agent_cfg,
         "wl_chase with a scripted lower level and the torso held upright (privileged: experts and tests)",
         same_policy_as="wl_chase")
