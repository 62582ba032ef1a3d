# SPDX-License-Identifier: BSD-3-Clause
"""What may leave the simulator: only deployable inputs and outputs reach an export.

A robot has no exact object state, masses, contact flags or privilege level (privileged observation
groups), and cannot apply virtual forces (privileged action terms, the trailing action dims). An
exported policy therefore reads exactly one non-privileged observation group, and its output is cut
to the deployable action dims. A policy that needs privileged inputs is a teacher: distil a student.
The upper level of a hierarchy exports with its lower level's export beside it; a simulated stand-in for
the lower level (the scripted whole-body action) has none and is refused.
"""

from __future__ import annotations

from pathlib import Path

import torch

from batonlab.deploy.manifest_sections import COMMAND_LAYER_TYPE


DISTIL_HINT = ("distil a deployable student: batonlab train task=... agent.algorithm.class_name=Distillation "
               "teacher=RUN_DIR")


class ExportError(ValueError):
    """A policy or task that cannot be exported as it is (the message says what to do)."""


def deployable_obs_group(env, policy) -> str:
    """The one observation group `policy` reads, checked to be deployable.

    Args:
        env: The `BatonEnv` the policy runs in.
        policy: rsl-rl's actor or student (`MLPModel`, its `obs_groups` are the groups it concatenates).

    Raises:
        ExportError: The policy reads a privileged group or more than one group. (`observations.last_action`
            holds only the deployable action dims, so a deployable group never carries privileged ones.)
    """
    groups = list(policy.obs_groups)
    observations = env.cfg.observations
    privileged = [g for g in groups if observations[g].privileged]
    if privileged:
        raise ExportError(f"the policy reads the privileged observation group(s) {privileged} (simulation only) and "
                          f"cannot be exported; {DISTIL_HINT}")
    if len(groups) != 1:
        raise ExportError(f"the policy reads the observation groups {groups}; an export takes exactly one "
                          "(its manifest describes one group): train it with one actor group, or "
                          f"{DISTIL_HINT} and agent.obs_groups.student=[GROUP]")
    return groups[0]


def lower_level_export(env, task: str) -> Path | None:
    """The export folder of the lower level under a task's command layer (None: a single-level task).

    Raises:
        ExportError: the command layer's lower level is a simulation stand-in (`ScriptedWholeBodyAction`), not a
            trained policy with an export of its own.
    """
    layers = {n: t for n, t in env.action_manager.terms.items() if t.action_type == COMMAND_LAYER_TYPE}
    if not layers:
        return None
    name, layer = next(iter(layers.items()))
    manifest = getattr(layer, "manifest", None)  # `WholeBodyPolicyAction`: the lower level's loaded export
    if manifest is None or manifest.base_dir is None:
        raise ExportError(f"task '{task}' runs its commands (action term '{name}', {type(layer).__name__}) through a "
                          "simulated stand-in for the whole-body policy, which no robot has: export the upper level "
                          "trained over a whole-body policy's export (the task without `_scripted`, with "
                          "env.actions.commands.params.export=...)")
    return Path(manifest.base_dir)


def deployable_action_dim(env) -> int:
    """The leading policy outputs a robot executes: every action dim but the privileged ones."""
    return env.action_manager.action_dim - env.action_manager.privileged_dim


class DeployableOutputs(torch.nn.Module):
    """Wraps an exportable actor so that it returns only the first `action_dim` outputs."""

    def __init__(self, module: torch.nn.Module, action_dim: int):
        super().__init__()
        self.module = module
        self.action_dim = action_dim
        self.input_size = module.input_size

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """(batch, obs_dim) → (batch, action_dim)."""
        return self.module(obs)[:, : self.action_dim]
