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


def field_specs(env, group: str, fields: list[str] | tuple[str, ...] | None = None) -> list[FieldSpec]:
    """The fields of observation group `group` in layout order (only `fields`, if given); clear errors
    for an unknown group or field."""
    manager = env.observation_manager
    if group not in manager.layout:
        raise KeyError(f"observation group '{group}' does not exist; groups: {sorted(manager.layout)}")
    specs = [FieldSpec(t.name, t.size, t.func, dict(t.params)) for t in manager.layout[group]]
    if fields:
        unknown = sorted(set(fields) - {s.name for s in specs})
        if unknown:
            raise KeyError(f"observation group '{group}' has no fields {unknown}; fields: {[s.name for s in specs]}")
        specs = [s for s in specs if s.name in fields]
    return specs


def read_fields(env, group: str, fields: list[str] | tuple[str, ...] | None = None) -> dict[str, torch.Tensor]:
    """{term name: (num_envs, size) float tensor} of the group's terms (only `fields`, if given) on the
    current sim state."""
    terms = env.observation_manager.terms[group]
    out = {}
    for name, term in terms.items():
        if fields and name not in fields:
            continue
        value = term(env)
        out[name] = (value.unsqueeze(-1) if value.ndim == 1 else value).float()
    return out


def read_features(env, group: str, fields: list[str] | tuple[str, ...] | None = None) -> torch.Tensor:
    """(num_envs, dim): the group's fields (only `fields`, if given) concatenated in layout order."""
    return torch.cat(list(read_fields(env, group, fields).values()), dim=-1)


def describe_fields(specs: list[FieldSpec]) -> str:
    """A plain-text table of the fields for an LLM prompt: name, width, the function that computes it."""
    lines = []
    for spec in specs:
        params = ", ".join(f"{k}={v!r}" for k, v in spec.params.items())
        lines.append(f'- obs["{spec.name}"]: shape (num_envs, {spec.size}); computed by {spec.func}({params})')
    return "\n".join(lines)
