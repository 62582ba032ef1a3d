# SPDX-License-Identifier: BSD-3-Clause
"""The robot's own tasks with one flat policy (`wl_door_flat`, `wl_baton_flat`, `wl_chase_flat`): joint targets for the
legs, wheels, arm and gripper from what the robot senses, no command layer between.

Each is its hierarchical task (scene, events, rewards, success, perception) with the whole body's joint terms as the
actions (the legs and wheels as the whole-body policy drives them, the arm by joint position) and the joint states
added to the policy's observation. Its teacher (`teacher=expert`) is the task's expert commanding the frozen
whole-body policy of `env.expert.params.layer.params.export=RUN/exported`, read out as these joint actions
(`experts.hierarchy.HierarchyExpert`): distillation puts both levels into one network.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from batonlab.actions import JointPositionAction
from batonlab.env.cfg import ActionTermCfg, ObsGroupCfg, TaskCfg, TermCfg
from batonlab.experts.hierarchy import HierarchyExpert
from batonlab.rl.cfg import RunnerCfg
from batonlab.tasks import register
from batonlab.tasks.wl_baton import make_wl_baton_cfg
from batonlab.tasks.wl_chase import make_wl_chase_cfg
from batonlab.tasks.wl_door import make_command_layer_agent_cfg, make_wl_door_cfg

ARM_SCALE = 0.5
"""The flat policy's arm action: joint position targets about the default pose [rad per unit action]."""

JOINT_STATE_TERMS = ("leg_pos", "leg_vel", "wheel_vel", "arm_pos", "arm_vel")
"""The whole-body policy's observation terms a flat policy reads too (its joints' positions and velocities)."""


def flat_policy_observations(hierarchical: ObsGroupCfg, lower: ObsGroupCfg) -> ObsGroupCfg:
    """The hierarchical task's deployable group with the lower level's joint states inserted after the gripper."""
    terms = {}
    for name, term in hierarchical.terms.items():
        terms[name] = term
        if name == "gripper":
            terms.update({n: copy.deepcopy(lower.terms[n]) for n in JOINT_STATE_TERMS})
    return ObsGroupCfg(terms=terms, enable_corruption=hierarchical.enable_corruption)


def make_flat_cfg(make_hierarchical: Callable[..., TaskCfg], play: bool = False, export: str | None = None) -> TaskCfg:
    """The flat variant of a hierarchical task (`make_hierarchical(play, export)`); `export`: its teacher's lower level."""
    cfg = make_hierarchical(play, export)
    layer = cfg.actions["commands"]
    lower = copy.deepcopy(layer.params["actions"])
    cfg.actions = {"legs": lower["legs"], "wheels": lower["wheels"],
                   "arm": ActionTermCfg(cls=JointPositionAction, joints=lower["arm"].joints, scale=ARM_SCALE),
                   "gripper": cfg.actions["gripper"]}
    cfg.observations["policy"] = flat_policy_observations(cfg.observations["policy"], layer.params["observations"])
    cfg.expert = TermCfg(func=HierarchyExpert, params={"expert": cfg.expert, "layer": layer})
    return cfg


def make_wl_door_flat_cfg(play: bool = False, export: str | None = None) -> TaskCfg:
    """`wl_door` with one flat policy."""
    return make_flat_cfg(make_wl_door_cfg, play, export)


def make_wl_baton_flat_cfg(play: bool = False, export: str | None = None) -> TaskCfg:
    """`wl_baton` with one flat policy."""
    return make_flat_cfg(make_wl_baton_cfg, play, export)


def make_wl_chase_flat_cfg(play: bool = False, export: str | None = None) -> TaskCfg:
    """`wl_chase` with one flat policy."""
    return make_flat_cfg(make_wl_chase_cfg, play, export)


def flat_agent(task: str) -> Callable[[], RunnerCfg]:
    """The command layer's runner config, logged under `<task>_flat`."""
    return lambda: make_command_layer_agent_cfg(f"{task}_flat")


for _task, _make in (("wl_door", make_wl_door_flat_cfg), ("wl_baton", make_wl_baton_flat_cfg),
                     ("wl_chase", make_wl_chase_flat_cfg)):
    register(f"{_task}_flat", _make, flat_agent(_task), f"{_task} with one flat policy to the joints (teacher: its "
             "expert over a whole-body policy, env.expert.params.layer.params.export=...)")
