# SPDX-License-Identifier: BSD-3-Clause
"""Raw policy output → joint targets, as the training action terms computed them."""

from __future__ import annotations

import numpy as np

from batonlab.deploy.kinematics import quat_to_matrix
from batonlab.deploy.manifest import IKSpec, Manifest
from batonlab.deploy.pose import canonical_pose

from batonlab.deploy.wiring import EFFORT, POSITION, VELOCITY, command_interface  # noqa: F401  (re-exported)


class ActionProcessor:
    """`target = clamp(offset + scale * clip(raw), ctrl_range)` per action term, concatenated in policy order.

    The offset is the default pose (`use_default_offset`), zero, or for `ik_residual` terms the joints'
    positions plus the damped least-squares step toward the term's command (`batonlab.deploy.kinematics`).
    The clamp to the actuators' control range is the one training's action terms apply before the
    targets reach the simulated actuators, so the robot gets the targets the policy was trained with.
    """

    def __init__(self, manifest: Manifest):
        self.scale = manifest.action_scale
        self.offset = manifest.action_offset
        low, high = [], []
        self.ik_terms: list[tuple[slice, IKSpec]] = []
        """(the term's slice of the targets, its IK step), for `ik_residual` terms."""
        start = 0
        for a in manifest.actions:
            lo, hi = a.clip if a.clip is not None else (-np.inf, np.inf)
            low += [lo] * len(a.joints)
            high += [hi] * len(a.joints)
            if a.ik is not None:
                self.ik_terms.append((slice(start, start + len(a.joints)), a.ik))
            start += len(a.joints)
        self.clip_low, self.clip_high = np.array(low), np.array(high)
        self.ctrl_low, self.ctrl_high = manifest.ctrl_range[:, 0], manifest.ctrl_range[:, 1]
        self.kinds = tuple(command_interface(a.type) for a in manifest.actions for _ in a.joints)
        """Per joint: POSITION, VELOCITY or EFFORT."""

    def __call__(self, raw: np.ndarray, joint_pos: np.ndarray | None = None,
                 commands: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """(action_dim,) raw action → (action_dim,) float64 targets; `ik_residual` terms also read the measured
        positions of the policy joints (action_dim,) [rad] and the commands by name."""
        offset = self.offset
        if self.ik_terms:
            if joint_pos is None or commands is None:
                raise ValueError("ik_residual action terms need the joint positions and the commands")
            offset = offset.copy()
            for part, ik in self.ik_terms:
                q = np.asarray(joint_pos[part], dtype=np.float64)
                target = np.asarray(commands[ik.command], dtype=np.float64)
                rot = quat_to_matrix(canonical_pose(target)[3:]) if ik.orientation_weight > 0 else None
                offset[part] = q + ik.chain.dls_step(q, target[:3], ik.damping, rot, ik.orientation_weight)
        target = offset + self.scale * np.clip(raw, self.clip_low, self.clip_high)
        return np.minimum(np.maximum(target, self.ctrl_low), self.ctrl_high)
