# SPDX-License-Identifier: BSD-3-Clause
"""A task's scripted expert as rsl-rl Distillation's teacher: the expert runs in the env as the privileged observation
group `expert` (its actions for the current state), and this teacher passes that group on as its labels."""

from __future__ import annotations

import torch
from tensordict import TensorDict
from torch import nn

from batonlab.env.cfg import ObsGroupCfg, ObsTermCfg, TermCfg

EXPERT_GROUP = "expert"
"""The observation group holding the expert's actions (num_envs, num_actions); privileged, never exported."""


class ExpertTeacher(nn.Module):
    """rsl-rl's teacher interface over the `expert` observation group: no weights, no state, labels = the group."""

    is_recurrent = False

    def __init__(self, obs: TensorDict, obs_groups: dict[str, list[str]], obs_set: str, output_dim: int, **unused):
        super().__init__()
        groups = obs_groups[obs_set]
        if groups != [EXPERT_GROUP] or obs[EXPERT_GROUP].shape[-1] != output_dim:
            raise ValueError(f"an expert teacher reads the one group '{EXPERT_GROUP}' of width {output_dim} (the "
                             f"actions); got groups {groups}")

    def forward(self, obs: TensorDict, *args, **kwargs) -> torch.Tensor:
        """(num_envs, num_actions) the expert's actions."""
        return obs[EXPERT_GROUP]

    def reset(self, dones: torch.Tensor | None = None, hidden_state=None) -> None:
        """Stateless here: the expert's own state lives in its env term."""

    def get_hidden_state(self):
        return None


def expert_observations(expert: TermCfg) -> ObsGroupCfg:
    """The privileged group `EXPERT_GROUP` that runs a task's scripted expert (`TaskCfg.expert`) every step."""
    return ObsGroupCfg(terms={"actions": ObsTermCfg(func=expert.func, params=dict(expert.params))}, privileged=True)
