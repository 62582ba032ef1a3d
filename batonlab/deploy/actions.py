# SPDX-License-Identifier: BSD-3-Clause
"""Raw policy output → joint targets, as the training action terms computed them."""

from __future__ import annotations

import numpy as np

from batonlab.deploy.manifest import Manifest

from batonlab.deploy.wiring import EFFORT, POSITION, VELOCITY, command_interface  # noqa: F401  (re-exported)


class ActionProcessor:
    """`target = clamp(offset + scale * clip(raw), ctrl_range)` per action term, concatenated in policy order.

    The clamp to the actuators' control range is the one training's action terms apply before the
    targets reach the simulated actuators, so the robot gets the targets the policy was trained with.
    """

    def __init__(self, manifest: Manifest):
        self.scale = manifest.action_scale
        self.offset = manifest.action_offset
        low, high = [], []
        for a in manifest.actions:
            lo, hi = a.clip if a.clip is not None else (-np.inf, np.inf)
            low += [lo] * len(a.joints)
            high += [hi] * len(a.joints)
        self.clip_low, self.clip_high = np.array(low), np.array(high)
        self.ctrl_low, self.ctrl_high = manifest.ctrl_range[:, 0], manifest.ctrl_range[:, 1]
        self.kinds = tuple(command_interface(a.type) for a in manifest.actions for _ in a.joints)
        """Per joint: POSITION, VELOCITY or EFFORT."""

    def __call__(self, raw: np.ndarray) -> np.ndarray:
        """(action_dim,) raw action → (action_dim,) float64 targets."""
        target = self.offset + self.scale * np.clip(raw, self.clip_low, self.clip_high)
        return np.minimum(np.maximum(target, self.ctrl_low), self.ctrl_high)
