# SPDX-License-Identifier: BSD-3-Clause
"""A flat task's teacher: a command-layer expert over a frozen whole-body policy, read out as the joint actions of the
flat policy it teaches (the whole body's targets, and the gripper)."""

from __future__ import annotations

import torch

from batonlab.actions.command_layer import LowerLevelError
from batonlab.env.cfg import ActionTermCfg, TermCfg
from batonlab.env.terms import ExpertTerm, build_term


class HierarchyExpert(ExpertTerm):
    """The actions (num_envs, num_actions) of a flat task's joint terms that do what `expert` commands through `layer`.

    `layer` (a `WholeBodyPolicyAction` term's config: the whole-body policy's export) is built alongside
    the env's own action terms, not among them: each call the expert's commands are held in the env's command terms,
    the layer's lower level computes its joint targets for them (its own observation and last action), and each flat
    term's action is the one that gives the same target, `(target - offset) / scale`. The gripper's action is the
    expert's. The flat task's terms must drive the lower level's joints, plus `gripper`.

    Args:
        expert: The command-layer expert (`experts.jaw.CommandLayerExpert`) and its params.
        layer: The command layer the expert's commands go through.
        gripper: The flat task's gripper term.

    Raises:
        LowerLevelError: `layer` names no export (the message gives the override), or its export is not one.
    """

    def __init__(self, env, expert: TermCfg, layer: ActionTermCfg, gripper: str = "gripper"):
        self.env = env
        if not layer.params.get("export"):
            raise LowerLevelError("this flat task's teacher commands a trained whole-body policy: name its export folder "
                                  "with env.expert.params.layer.params.export=RUN_DIR/exported")
        self.layer = layer.cls(env, layer)
        self.expert = build_term(expert.func, {**expert.params, "commands": self.layer}, env, "expert.params.expert")
        lower = {j: (term, i) for term in self.layer.lower.terms.values() for i, j in enumerate(term.joint_names)}
        self.targets: list[tuple[slice, object, object, torch.Tensor]] = []
        """(the flat term's columns, the flat term, the lower level's term with its joints, their indices in that term)
        per flat joint term."""
        for name, term in env.action_manager.deployable_terms.items():
            if name == gripper:
                continue
            owners = {id(lower[j][0]) for j in term.joint_names if j in lower}
            missing = [j for j in term.joint_names if j not in lower]
            if missing or len(owners) != 1:
                raise ValueError(f"actions['{name}'] drives {list(term.joint_names)}; the lower level's terms drive "
                                 f"{[list(t.joint_names) for t in self.layer.lower.terms.values()]}: each flat term must "
                                 "take its joints from one of them")
            source = lower[term.joint_names[0]][0]
            columns = torch.tensor([lower[j][1] for j in term.joint_names], device=env.device)
            self.targets.append((env.action_manager.term_slice(name), term, source, columns))
        self.gripper_slice = env.action_manager.term_slice(gripper)

    def __call__(self, env) -> torch.Tensor:
        """(num_envs, num_actions) the flat actions of the expert's commands, executed by the lower level now."""
        upper = self.expert(env)
        self.layer.execute(upper[:, self.expert.commands_slice])  # about the tool now: a label has no delay
        actions = torch.zeros(env.num_envs, env.num_actions, device=env.device)
        for columns, term, source, indices in self.targets:
            actions[:, columns] = (source.processed_actions[:, indices] - term.offset) / term.scale
        actions[:, self.gripper_slice] = upper[:, self.expert.gripper_slice]
        return actions

    def reset(self, env_ids: torch.Tensor) -> None:
        """The expert's and the lower level's state (its actions, its observation history) start again where envs reset."""
        self.expert.reset(env_ids)
        self.layer.reset(env_ids)
