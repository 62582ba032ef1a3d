# SPDX-License-Identifier: BSD-3-Clause
"""Observation groups: each term is computed, noised, clipped, scaled and stacked in history.

The same per-term recipe (scale, clip, history) is written to the export manifest, and
`batonlab.deploy` rebuilds the policy input from it on the robot.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from tensordict import TensorDict

from batonlab.env.cfg import ObsGroupCfg, ObsTermCfg
from batonlab.env.terms import build_term, qualified_name, reset_term


@dataclass
class ObsTermLayout:
    """Where a term sits in its group's vector, and how it was processed."""

    name: str
    size: int
    """Width of one frame of the term."""
    history_length: int
    """Stacked past frames (0: current only); the term occupies size * max(1, history_length) columns."""
    scale: float
    clip: tuple[float, float] | None
    noise_std: float
    func: str


class ObservationManager:
    """Computes every observation group into a `TensorDict` of (num_envs, dim) tensors."""

    def __init__(self, env, cfgs: dict[str, ObsGroupCfg]):
        self.env = env
        self.cfgs = cfgs
        self.terms = {
            group: {name: build_term(t.func, t.params, env, f"observations['{group}']['{name}']") for name, t in g.terms.items()}
            for group, g in cfgs.items()
        }
        self._history: dict[tuple[str, str], torch.Tensor] = {}
        self.layout: dict[str, list[ObsTermLayout]] = {}
        for group, g in cfgs.items():
            self.layout[group] = []
            for name, t in g.terms.items():
                value = self._raw(group, name)
                if value.ndim != 2 or value.shape[0] != env.num_envs:
                    raise ValueError(
                        f"observation term '{group}/{name}' must return (num_envs, k), got {tuple(value.shape)}"
                    )
                size = value.shape[1]
                if t.history_length > 0:
                    self._history[(group, name)] = torch.zeros(env.num_envs, t.history_length, size, device=env.device)
                self.layout[group].append(
                    ObsTermLayout(name, size, t.history_length, t.scale, t.clip, t.noise_std, qualified_name(t.func))
                )
        self._fresh = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)

    def group_dim(self, group: str) -> int:
        return sum(t.size * max(1, t.history_length) for t in self.layout[group])

    def compute(self) -> TensorDict:
        """All groups for the current state; advances history buffers by one frame."""
        out = {group: self._compute_group(group) for group in self.cfgs}
        self._fresh[:] = False
        return TensorDict(out, batch_size=[self.env.num_envs], device=self.env.device)

    def _raw(self, group: str, name: str) -> torch.Tensor:
        value = self.terms[group][name](self.env)
        return value.unsqueeze(-1) if value.ndim == 1 else value

    def _compute_group(self, group: str) -> torch.Tensor:
        cfg = self.cfgs[group]
        parts = []
        for name, term_cfg in cfg.terms.items():
            value = self._process(self._raw(group, name).float(), term_cfg, cfg.enable_corruption)
            if term_cfg.history_length > 0:
                history = self._history[(group, name)]
                history[:] = torch.roll(history, shifts=-1, dims=1)
                history[:, -1] = value
                # A freshly reset env has no past: fill its history with the current frame.
                history[self._fresh] = value[self._fresh].unsqueeze(1)
                value = history.reshape(self.env.num_envs, -1)
            parts.append(value)
        return torch.cat(parts, dim=-1)

    def _process(self, value: torch.Tensor, cfg: ObsTermCfg, corrupt: bool) -> torch.Tensor:
        if corrupt and cfg.noise_std > 0.0:
            value = value + cfg.noise_std * self.env.normal(value.shape)
        if cfg.clip is not None:
            value = value.clamp(*cfg.clip)
        return value * cfg.scale

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        self._fresh[env_ids] = True
        for group_terms in self.terms.values():
            for term in group_terms.values():
                reset_term(term, env_ids)
        return {}
