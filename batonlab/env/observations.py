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
from batonlab.env.terms import build_term, qualified_name
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
        self._delayed: dict[tuple[str, str], torch.Tensor] = {}
        """(num_envs, max_delay + 1, size) latest values of delayed terms, newest first."""
        self._delay_steps: dict[tuple[str, str], torch.Tensor] = {}
        """(num_envs,) each env's delay of a delayed term [control steps], drawn at reset."""
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
                if g.enable_corruption and t.delay_range_steps[1] > 0:
                    self._delayed[(group, name)] = torch.zeros(env.num_envs, t.delay_range_steps[1] + 1, size, device=env.device)
                    self._delay_steps[(group, name)] = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
                self.layout[group].append(
                    ObsTermLayout(name=name, func=qualified_name(t.func), params=to_plain(t.params), size=size,
                                  history_length=t.history_length, scale=float(t.scale),
                                  clip=tuple(map(float, t.clip)) if t.clip is not None else None, noise_std=float(t.noise_std))
                )
        self._newest: dict[tuple[str, str], torch.Tensor] = {}
        """(num_envs, size) each term's latest frame as the policy saw it (noised, delayed, clipped, scaled)."""
        self._fresh = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
        self._draw_delays(env.all_env_ids)

    def group_dim(self, group: str) -> int:
        """Width of one group's observation vector."""
        return sum(t.width for t in self.layout[group])

    def compute(self) -> TensorDict:
        """All groups for the current state; advances history buffers by one frame."""
        out = {group: self._compute_group(group) for group in self.cfgs}
        self._fresh[:] = False
        return TensorDict(out, batch_size=[self.env.num_envs], device=self.env.device)

    def newest(self, group: str, name: str) -> torch.Tensor | None:
        """(num_envs, size) term `name`'s frame of the latest computation of `group` (a group computed earlier in the
        same `compute` counts), unscaled; None before the first. An unknown group or term is refused."""
        if name not in self.cfgs.get(group, ObsGroupCfg(terms={})).terms:
            raise KeyError(f"no observation term '{group}/{name}'; the group's terms are "
                           f"{list(self.cfgs[group].terms) if group in self.cfgs else []} (groups: {list(self.cfgs)})")
        value = self._newest.get((group, name))
        return None if value is None else value / self.cfgs[group].terms[name].scale

    def _raw(self, group: str, name: str) -> torch.Tensor:
        value = self.terms[group][name](self.env)
        return value.unsqueeze(-1) if value.ndim == 1 else value

    def _compute_group(self, group: str) -> torch.Tensor:
        cfg = self.cfgs[group]
        parts = []
        for name, term_cfg in cfg.terms.items():
            value = self._raw(group, name).float()
            if (group, name) in self._delayed:
                value = self._delay(group, name, value)
            value = self._process(value, term_cfg, cfg.enable_corruption)
            self._newest[(group, name)] = value
            if term_cfg.history_length > 0:
                history = self._history[(group, name)]
                history[:] = torch.roll(history, shifts=-1, dims=1)
                history[:, -1] = value
                # A freshly reset env has no past: fill its history with the current frame.
                history[self._fresh] = value[self._fresh].unsqueeze(1)
                value = history.reshape(self.env.num_envs, -1)
            parts.append(value)
        return torch.cat(parts, dim=-1)

    def _delay(self, group: str, name: str, value: torch.Tensor) -> torch.Tensor:
        """The value each env saw `delay` steps ago (a fresh env has no past: it sees the current one)."""
        buffer = self._delayed[(group, name)]
        buffer[:] = torch.roll(buffer, shifts=1, dims=1)
        buffer[:, 0] = value
        buffer[self._fresh] = value[self._fresh].unsqueeze(1)
        return buffer[torch.arange(self.env.num_envs, device=value.device), self._delay_steps[(group, name)]]

    def _draw_delays(self, env_ids: torch.Tensor) -> None:
        for (group, name), steps in self._delay_steps.items():
            low, high = self.cfgs[group].terms[name].delay_range_steps
            steps[env_ids] = torch.randint(low, high + 1, (len(env_ids),), generator=self.env.generator,
                                           device=self.env.device)

    def _process(self, value: torch.Tensor, cfg: ObsTermCfg, corrupt: bool) -> torch.Tensor:
        if corrupt and cfg.noise_std > 0.0:
            value = value + cfg.noise_std * self.env.normal(value.shape)
        if cfg.clip is not None:
            value = value.clamp(*cfg.clip)
        return value if cfg.scale == 1.0 else value * cfg.scale

    def reset(self, env_ids: torch.Tensor) -> dict[str, float]:
        """Envs that reset refill their history from the next frame and draw new delays."""
        self._fresh[env_ids] = True
        self._draw_delays(env_ids)
        for group_terms in self.terms.values():
            for term in group_terms.values():
                term.reset(env_ids)
        return {}
