# SPDX-License-Identifier: BSD-3-Clause
"""Named state features read straight from an observation group's terms, for learned rewards.

Learned rewards (a potential Φ, an LLM-written progress function) need the *post-step* state inside
the reward manager, which runs before the observation manager: `env.obs` still holds the previous
step. So they call the group's term functions themselves: raw values, without noise, scale, delay or
history (those belong to what the policy sees, not to what the reward judges).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class FieldSpec:
    """One named field of the features: an observation term of the group."""

    name: str
    size: int
    func: str
    """Qualified name of the term function (tells an LLM what the field means)."""
    params: dict


def field_specs(env, group: str) -> list[FieldSpec]:
    """The fields of observation group `group`, in order; a clear error for an unknown group."""
    manager = env.observation_manager
    if group not in manager.layout:
        raise KeyError(f"observation group '{group}' does not exist; groups: {sorted(manager.layout)}")
    return [FieldSpec(t.name, t.size, t.func, dict(t.params)) for t in manager.layout[group]]


def read_fields(env, group: str) -> dict[str, torch.Tensor]:
    """{term name: (num_envs, size) float tensor} of the group's terms on the current sim state."""
    terms = env.observation_manager.terms[group]
    out = {}
    for name, term in terms.items():
        value = term(env)
        out[name] = (value.unsqueeze(-1) if value.ndim == 1 else value).float()
    return out


def read_features(env, group: str) -> torch.Tensor:
    """(num_envs, dim): the group's fields concatenated in layout order."""
    return torch.cat(list(read_fields(env, group).values()), dim=-1)


def describe_fields(specs: list[FieldSpec]) -> str:
    """A plain-text table of the fields for an LLM prompt: name, width, the function that computes it."""
    lines = []
    for spec in specs:
        params = ", ".join(f"{k}={v!r}" for k, v in spec.params.items())
        lines.append(f'- obs["{spec.name}"]: shape (num_envs, {spec.size}); computed by {spec.func}({params})')
    return "\n".join(lines)
