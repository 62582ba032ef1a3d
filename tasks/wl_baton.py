# SPDX-License-Identifier: BSD-3-Clause
"""`wl_baton`: a relay baton stands in a cup held out by a hand moving ahead of the robot (a mocap holder on an arc
drawn per episode). The wheel-legged robot with arm6 catches up, closes its gripper on the baton, lifts it out of the
cup and follows the holder carrying it. Success: the baton taken (in the hand, both pads touching it, out of the cup)
and from then on, at every step to the end of the episode, still in the hand with the robot 0.25-1.2 m from the
holder.

The policy is the upper level of a hierarchy, as in `wl_door` (its commands and gripper; `wl_baton_scripted` runs
them on the scripted lower level, the expert's variant).

Observation groups:
- `policy` (deployable): the base's angular velocity and gravity direction, the tool pose and gripper opening, the
  baton's and the holder's positions in the arm base frame over the last 4 steps (as perception reports them: noisy,
  late), the last action;
- `privileged` (simulation only): the exact tool-to-baton vector, the holder's velocity in the arm base's heading
  frame, what the path drew, the pads' contacts.
"""

from __future__ import annotations

import mujoco

from batonlab import events, observations
from batonlab.env.cfg import EventTermCfg, ObsGroupCfg, ObsTermCfg, RewardTermCfg, TaskCfg, TermCfg
from batonlab.experts import BatonTakerExpert
from batonlab.rewards import baton, manipulation, regularizers
from batonlab.rl.cfg import RunnerCfg
from batonlab.robots import baton as baton_asset
from batonlab.robots import wheel_legged as wl
from batonlab.tasks import register
from batonlab.tasks.table_scene import FINGER_PADS, add_look_at_camera
from batonlab.tasks.wl_door import (command_layer_policy_observations, make_command_layer_agent_cfg,
                                    make_command_layer_cfg, perception)
from batonlab.tasks.wl_loco_manip import EE_QUAT_SENSOR, EE_SENSOR, make_loco_manip_scene_spec

HOLDER_HEIGHT = 0.40
"""The cup's floor above the ground [m] (the baton's centre 0.105 m above it, 0.09 m under the arm's base)."""

HOLDER_START = (1.0, 0.0)
"""The holder's nominal start [m, world]: 1 m ahead of the robot."""

PAD_CONTACTS = tuple(baton_asset.pad_on_baton_sensor(pad) for pad in FINGER_PADS)
"""Contact counts of arm6's finger pads with the baton."""

HOLD_RADIUS = 0.06
"""The baton counts as in the hand within this distance of the tool point [m] (both pads touching it)."""

LIFT = baton_asset.BATON_REST_HEIGHT + baton_asset.CUP_DEPTH
"""The baton's centre this high above the cup's floor is out of the cup [m] (its bottom level with the walls' top)."""

FOLLOW_RANGE = (0.25, 1.2)
"""Distances to the holder that count as following [m]."""

FOLLOW_DISTANCE = 0.6
"""The distance to the holder the follow reward prefers [m]."""

HISTORY = 4
"""Frames of the baton's and the holder's positions the policy sees (0.08 s)."""

BATON_CAMERA = "baton_view"
"""A camera that follows the robot from behind and to its left, looking 0.7 m ahead of it."""


def make_wl_baton_scene_spec() -> mujoco.MjSpec:
    """The wheel-legged robot with arm6 and the baton in its holder, 1 m ahead."""
    spec = make_loco_manip_scene_spec()
    spec.modelname = "wl_baton"
    # A pinched smooth rod creeps through the pads under MuJoCo's soft friction (9 mm/s here, out of the hand within
    # the episode); a few no-slip iterations stop it (under 0.01 mm/s).
    spec.option.noslip_iterations = 3
    baton_asset.add_baton_holder(spec, pos=(*HOLDER_START, HOLDER_HEIGHT), base_site="arm_base_site", pads=FINGER_PADS)
    add_look_at_camera(spec, BATON_CAMERA, eye=(-1.0, 2.2, 2.0), look=(0.7, 0.0, 0.3), body=wl.BASE_BODY)
    return spec


def baton_policy_observations(play: bool) -> ObsGroupCfg:
    """`wl_baton`'s deployable group: the baton's and the holder's positions over the last `HISTORY` steps, perceived
    (how they move: the holder does not wait for the robot)."""
    late = perception(play)
    sensors = {"baton_pos": baton_asset.BATON_POS_B_SENSOR, "holder_pos": baton_asset.HOLDER_POS_B_SENSOR}
    return command_layer_policy_observations(play, {
        name: ObsTermCfg(func=observations.sensor, params={"name": sensor}, history_length=HISTORY, **late)
        for name, sensor in sensors.items()})


def make_wl_baton_cfg(play: bool = False, export: str | None = None, scripted: bool = False) -> TaskCfg:
    """`wl_baton` over the trained whole-body policy's `export` (or `scripted`)."""
    cfg = make_command_layer_cfg(play, export, scripted)
    cfg.scene.build = make_wl_baton_scene_spec
    cfg.scene.camera = BATON_CAMERA
    cfg.events["holder"] = EventTermCfg(
        func=events.RandomizeHolderPath, mode="reset",
        params={"holder": baton_asset.HOLDER_BODY, "body": baton_asset.BATON_BODY, "origin": (0.0, 0.0),
                "distance_range": (0.9, 1.2), "lateral_range": (-0.15, 0.15), "height_range": (0.37, 0.43),
                "heading_range": (-0.4, 0.4), "speed_range": (0.05, 0.25), "turn_rate_range": (-0.12, 0.12),
                "rest_height": baton_asset.BATON_REST_HEIGHT + 0.001})
    cfg.events["move_holder"] = EventTermCfg(func=events.move_holder, mode="interval", interval_range_s=(0.0, 0.0),
                                             params={"event": "holder"})
    taken = {"baton": baton_asset.BATON_BODY, "holder": baton_asset.HOLDER_BODY, "ee_sensor": "ee_pos_w",
             "touch_sensors": PAD_CONTACTS, "radius": HOLD_RADIUS, "lift": LIFT}
    cfg.rewards = {
        "reach": RewardTermCfg(func=manipulation.reach_object_tanh,
                               params={"body": baton_asset.BATON_BODY, "sensor": "ee_pos_w", "std": 0.1}, weight=1.0),
        "taken": RewardTermCfg(func=baton.baton_taken, params=taken, weight=4.0),
        "follow": RewardTermCfg(func=baton.follow_holder, params={
            **taken, "holder_sensor": baton_asset.HOLDER_POS_B_SENSOR, "distance": FOLLOW_DISTANCE, "std": 0.3},
            weight=4.0),
        "action_rate": RewardTermCfg(func=regularizers.action_rate_l2, weight=-0.01),
    }
    cfg.observations = {
        "policy": baton_policy_observations(play),
        "privileged": ObsGroupCfg(terms={
            "ee_to_baton": ObsTermCfg(func=observations.ee_to_body,
                                      params={"body": baton_asset.BATON_BODY, "sensor": "ee_pos_w"}),
            "holder_velocity": ObsTermCfg(func=observations.holder_velocity_heading, params={"event": "holder"}),
            "pad_contacts": ObsTermCfg(func=observations.touch_flags, params={"sensors": PAD_CONTACTS}),
        }, privileged=True),
    }
    cfg.expert = TermCfg(func=BatonTakerExpert, params={"event": "holder", "lift": LIFT + 0.05, "sensors": {
        "tool": EE_SENSOR, "tool_quat": EE_QUAT_SENSOR, "baton": baton_asset.BATON_POS_B_SENSOR,
        "holder": baton_asset.HOLDER_POS_B_SENSOR, "up": baton_asset.UP_B_SENSOR}})
    cfg.success = TermCfg(func=baton.BatonTakenAndFollowed, params={
        **taken, "holder_sensor": baton_asset.HOLDER_POS_B_SENSOR, "follow_range": FOLLOW_RANGE})
    return cfg


def make_wl_baton_scripted_cfg(play: bool = False) -> TaskCfg:
    """`wl_baton` with the scripted stand-in for the whole-body policy (the expert's and the tests' variant)."""
    return make_wl_baton_cfg(play, scripted=True)


def make_wl_baton_agent_cfg() -> RunnerCfg:
    """The command layer's PPO (`make_command_layer_agent_cfg`), logged under `wl_baton`."""
    return make_command_layer_agent_cfg("wl_baton")


register("wl_baton", make_wl_baton_cfg, make_wl_baton_agent_cfg,
         "wheel-legged robot with arm takes a baton from a moving holder and follows it (export=...)")
register("wl_baton_scripted", make_wl_baton_scripted_cfg, make_wl_baton_agent_cfg,
         "wl_baton with a scripted lower level and the torso held upright (privileged: experts and tests)",
         same_policy_as="wl_baton")
