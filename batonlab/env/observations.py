# SPDX-License-Identifier: BSD-3-Clause
"""Observation groups: each term is computed, noised, clipped, scaled and stacked in history.

Each term's layout (`ObsTermLayout`, defined once in `batonlab.deploy.manifest`) is what the export
writes to the manifest, and `batonlab.deploy` rebuilds the policy input from it on the robot.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from batonlab.deploy.manifest import ObsTermLayout
from batonlab.env.cfg import ObsGroupCfg, ObsTermCfg
from batonlab.env.terms import build_term, qualified_name, reset_term
from batonlab.utils.serialize import to_plain


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
                    ObsTermLayout(name=name, func=qualified_name(t.func), params=to_plain(t.params), size=size,
                                  history_length=t.history_length, scale=float(t.scale),
                                  clip=tuple(map(float, t.clip)) if t.clip is not None else None, noise_std=float(t.noise_std))
                )
        self._fresh = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)

    def group_dim(self, group: str) -> int:
        return sum(t.width for t in self.layout[group])

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
