# SPDX-License-Identifier: BSD-3-Clause
"""A policy that outputs its last action plus an MLP's correction (Δ-actions), as one network that exports to ONNX.

An expert that servos joint targets moves them a little each step: its label is the last target plus a small
step. A plain MLP imitating it must reproduce its `last_action` input to better than that step and learns to
repeat it instead (the "copycat" failure of imitation from histories); here the identity is exact and the MLP
learns the step alone. Inputs and outputs are the plain `MLPModel`'s, so rsl-rl, the exporter and the robot
runtime see no difference.
"""

from __future__ import annotations

import torch
from rsl_rl.models import MLPModel
from torch import nn


LAST_ACTION_TERM = "batonlab.observations.proprioception:last_action"
"""The observation term whose newest frame the residual is added to."""


def last_action_columns(layouts: list[list], num_actions: int) -> list[int]:
    """Columns of the newest `last_action` frame in the concatenation of observation groups (their `ObsTermLayout`
    lists, in the model's order).

    Raises:
        ValueError: No unscaled, unclipped, noise-free `last_action` term of width `num_actions` in the groups.
    """
    start = 0
    for layout in layouts:
        for term in layout:
            if term.func == LAST_ACTION_TERM:
                if term.size != num_actions or term.scale != 1.0 or term.clip is not None or term.noise_std > 0.0:
                    raise ValueError(f"agent.policy.last_action_residual: the observation term '{term.name}' must be "
                                     f"the unscaled, unclipped, noise-free last action of width {num_actions}")
                newest = start + term.width - term.size
                return list(range(newest, newest + term.size))
            start += term.width
    raise ValueError("agent.policy.last_action_residual needs a `last_action` observation term in the policy's groups")


class LastActionResidualModel(MLPModel):
    """rsl-rl's `MLPModel` whose output (the distribution's mean) is the observed last action plus the MLP's output.

    Args:
        residual_columns: Columns of the last action in the concatenated, unnormalised observations.
        All other arguments are `MLPModel`'s.
    """

    def __init__(self, *args, residual_columns: list[int], **kwargs):
        super().__init__(*args, **kwargs)
        self.register_buffer("residual_columns", torch.as_tensor(residual_columns, dtype=torch.long))

    def forward(self, obs, masks=None, hidden_state=None, stochastic_output: bool = False) -> torch.Tensor:
        raw = torch.cat([obs[group] for group in self.obs_groups], dim=-1)
        output = self.mlp(self.obs_normalizer(raw)) + raw.index_select(-1, self.residual_columns)
        if self.distribution is None:
            return output
        if stochastic_output:
            self.distribution.update(output)
            return self.distribution.sample()
        return self.distribution.deterministic_output(output)

    def as_onnx(self, verbose: bool) -> nn.Module:
        """The exportable network: `(1, obs_dim)` observations → `(1, num_actions)` actions."""
        return _ExportedResidual(super().as_onnx(verbose), self.residual_columns)

    def as_jit(self) -> nn.Module:
        return _ExportedResidual(super().as_jit(), self.residual_columns)


class _ExportedResidual(nn.Module):
    """An exported `MLPModel` copy plus the last-action columns of its input."""

    def __init__(self, exported: nn.Module, residual_columns: torch.Tensor):
        super().__init__()
        self.exported = exported
        self.register_buffer("residual_columns", residual_columns.clone())
        self.is_recurrent = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.exported(x) + x.index_select(-1, self.residual_columns)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.exported, name)  # input_names, get_dummy_inputs, reset, ...
