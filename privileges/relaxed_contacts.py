# SPDX-License-Identifier: BSD-3-Clause
"""Relaxed constraints: contact pairs switched off or softened while the privilege level is high.

MuJoCo filters contacts per geom (contype/conaffinity), which cannot single out one pair, and
mujoco_warp fixes that filter when the model is uploaded. Explicit contact pairs can be switched per
world on both backends: the scene excludes the two bodies' automatic contacts and adds a named
`<pair>` (`add_switchable_pair`); the privilege term then writes the pair's parameters per world:

- "disable": `pair_margin = -10 m`; MuJoCo generates a contact only when the distance is below the
  margin, so none is generated;
- "soften": the pair's friction is scaled and its `solref` time constant stretched (a spongy,
  slippery contact).

A pair is relaxed while λ > `threshold`, decided when an env resets (see `batonlab.env.privileges`).
"""

from __future__ import annotations

from typing import Literal

import mujoco
import torch

from batonlab.env.terms import PrivilegeTerm

DISABLED_MARGIN = -10.0
"""Pair margin that switches a pair off: contacts need a distance below it [m]."""


def add_switchable_pair(spec: mujoco.MjSpec, name: str, geom1: str, geom2: str, condim: int = 3) -> None:
    """Make the contact between two named geoms switchable: exclude their bodies' automatic contacts
    and add an explicit pair with the geoms' own friction.

    The exclusion covers every geom of the two bodies, so a body's other geoms that must still touch
    the other body need pairs of their own.
    """
    g1, g2 = spec.geom(geom1), spec.geom(geom2)
    if g1 is None or g2 is None:
        raise KeyError(f"add_switchable_pair('{name}'): no geom named {geom1 if g1 is None else geom2!r}")
    body1, body2 = g1.parent.name or "world", g2.parent.name or "world"
    if not any({e.bodyname1, e.bodyname2} == {body1, body2} for e in spec.excludes):
        spec.add_exclude(bodyname1=body1, bodyname2=body2)
    friction = [max(a, b) for a, b in zip(g1.friction, g2.friction)]
    spec.add_pair(name=name, geomname1=geom1, geomname2=geom2, condim=condim,
                  friction=[friction[0], friction[0], friction[1], friction[2], friction[2]])


class RelaxedContacts(PrivilegeTerm):
    """Privilege term: the named pairs are relaxed in envs that reset while λ > `threshold`.

    Args:
        pairs: Names of explicit contact pairs (`add_switchable_pair`).
        threshold: Pairs are relaxed while the level is above this value.
        mode: "disable" (no contact at all) or "soften".
        friction_scale: "soften": factor on the pair's friction.
        timeconst_scale: "soften": factor on the pair's solref time constant (larger: softer).
    """

    def __init__(self, env, pairs: tuple[str, ...], threshold: float = 0.5, mode: Literal["disable", "soften"] = "disable",
                 friction_scale: float = 0.2, timeconst_scale: float = 5.0):
        if mode not in ("disable", "soften"):
            raise ValueError(f"RelaxedContacts: mode must be 'disable' or 'soften', got {mode!r}")
        self.env = env
        model = env.scene.model
        names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_PAIR, i) for i in range(model.npair)]
        missing = [p for p in pairs if p not in names]
        if missing:
            raise KeyError(f"RelaxedContacts: unknown contact pairs {missing}; the scene has {names} "
                           "(make them with batonlab.privileges.relaxed_contacts.add_switchable_pair)")
        self.pair_ids = torch.tensor([names.index(p) for p in pairs], dtype=torch.long)
        self.threshold, self.mode = float(threshold), mode
        self.friction_scale, self.timeconst_scale = float(friction_scale), float(timeconst_scale)
        self.fields = ("pair_margin",) if mode == "disable" else ("pair_friction", "pair_solref")
        self.nominal = {f: torch.as_tensor(getattr(model, f)[self.pair_ids.numpy()], dtype=torch.float32) for f in self.fields}
        self.relaxed = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        """(num_envs,) whether each env's pairs are relaxed now."""

    @property
    def is_relaxing(self) -> bool:
        """Whether envs that reset now get relaxed pairs."""
        return self.env.privilege_manager.level > self.threshold

    def relaxed_values(self) -> dict[str, torch.Tensor]:
        """The pairs' parameters while relaxed, by field, (num_pairs, *field shape)."""
        if self.mode == "disable":
            return {"pair_margin": torch.full_like(self.nominal["pair_margin"], DISABLED_MARGIN)}
        solref = self.nominal["pair_solref"].clone()
        solref[:, 0] *= self.timeconst_scale
        return {"pair_friction": self.nominal["pair_friction"] * self.friction_scale, "pair_solref": solref}

    def reset(self, env_ids: torch.Tensor) -> None:
        """Give the resetting envs' pairs the relaxed parameters while λ is above `threshold`, else the nominal ones."""
        self._write(env_ids, self.is_relaxing)

    def on_level_change(self, env) -> None:
        """Switch every env's pairs to relaxed or nominal parameters now, following the new λ."""
        self._write(env.all_env_ids, self.is_relaxing)

    def _write(self, env_ids: torch.Tensor, relax: bool) -> None:
        if len(env_ids) == 0 or bool((self.relaxed[env_ids] == relax).all()):
            return
        values = self.relaxed_values() if relax else self.nominal
        sim = self.env.sim
        cols = self.pair_ids.to(sim.device) if sim.device.type != "cpu" else self.pair_ids
        ids = env_ids.to(sim.device)
        fields = {}
        for field in self.fields:
            rows = sim.get_params(field)[ids].clone()
            rows[:, cols] = values[field].to(rows.device, rows.dtype)
            fields[field] = rows
        sim.set_params(ids, **fields)
        self.relaxed[env_ids] = relax
