# SPDX-License-Identifier: BSD-3-Clause
"""Raw policy output → joint targets, as the training action terms computed them."""

from __future__ import annotations

import numpy as np

from batonlab.deploy.kinematics import quat_to_matrix, rotation_vector_matrix
from batonlab.deploy.manifest import IKSpec, Manifest, ToolStepSpec
from batonlab.deploy.pose import canonical_pose

from batonlab.deploy.wiring import EFFORT, POSITION, VELOCITY, command_interface  # noqa: F401  (re-exported)


class ToolStepIK:
    """A `tool_step` term's state on the robot (the twin of training's `ToolStepAction`): the commanded tool point
    and the last IK solution, both started from the measured joints at the first step after `reset`."""

    def __init__(self, spec: ToolStepSpec, ctrl_low: np.ndarray, ctrl_high: np.ndarray):
        self.spec = spec
        self.ctrl_low, self.ctrl_high = ctrl_low, ctrl_high
        self.joint_low, self.joint_high = np.array(spec.joint_limits, dtype=np.float64).T
        self.ik_targets: np.ndarray | None = None
        """(joints,) the last IK solution [rad]; None until the first step after a reset."""
        self.command_pos: np.ndarray | None = None
        """(3,) the commanded tool point [m, chain base frame]."""

    def reset(self) -> None:
        """Start again from the measured joints at the next step (a fresh start, like an episode's reset)."""
        self.ik_targets = self.command_pos = None

    def __call__(self, step: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Scaled step (6,) [m, m, m, rad, rad, rad] and measured joints (joints,) [rad] → joint targets (joints,)."""
        spec, chain = self.spec, self.spec.chain
        if self.ik_targets is None:
            self.ik_targets = np.clip(q, self.ctrl_low, self.ctrl_high)
            self.command_pos = chain.forward(self.ik_targets)[0]
        tip, rot = chain.forward(q)[:2]
        lead = self.command_pos + step[:3] - tip
        lead = lead * (spec.max_lead / max(float(np.linalg.norm(lead)), spec.max_lead))
        self.command_pos = tip + lead
        goal_rot = rotation_vector_matrix(step[3:]) @ rot
        self.ik_targets = chain.dls_solve(self.ik_targets, self.command_pos, spec.damping, goal_rot,
                                          spec.rotation_weight, spec.iterations, self.joint_low, self.joint_high)
        return self.ik_targets


class ActionProcessor:
    """`target = clamp(offset + scale * clip(raw), ctrl_range)` per action term, concatenated in policy order.

    The offset is the default pose (`use_default_offset`), zero, or for `ik_residual` terms the joints'
    positions plus the damped least-squares step toward the term's command (`batonlab.deploy.kinematics`).
    A `tool_step` term's six raw actions step its commanded tool pose, and its targets are its IK's solution
    (`ToolStepIK`, stateful: `reset` at every fresh start). The clamp to the actuators' control range is the
    one training's action terms apply before the targets reach the simulated actuators, so the robot gets the
    targets the policy was trained with.
    """

    def __init__(self, manifest: Manifest):
        self.scale = manifest.action_scale
        self.offset = manifest.action_offset
        self.ctrl_low, self.ctrl_high = manifest.ctrl_range[:, 0], manifest.ctrl_range[:, 1]
        low, high = [], []
        self.ik_terms: list[tuple[slice, slice, IKSpec]] = []
        """(the term's slice of the raw action, of the targets, its IK step), for `ik_residual` terms."""
        self.tool_terms: list[tuple[slice, slice, ToolStepIK]] = []
        """(the term's slice of the raw action, of the targets, its IK), for `tool_step` terms."""
        self.plain_terms: list[tuple[slice, slice]] = []
        """(raw slice, target slice) of the terms whose targets are their scaled raw actions plus the offset."""
        raw_start = target_start = 0
        for a in manifest.actions:
            lo, hi = a.clip if a.clip is not None else (-np.inf, np.inf)
            low += [lo] * a.width
            high += [hi] * a.width
            raw, target = slice(raw_start, raw_start + a.width), slice(target_start, target_start + len(a.joints))
            if a.command_layer is not None:
                pass  # its raw actions are the lower level's commands (`batonlab.deploy.control.TwoLevels`)
            elif a.tool_step is not None:
                self.tool_terms.append((raw, target, ToolStepIK(a.tool_step, self.ctrl_low[target], self.ctrl_high[target])))
            else:
                self.plain_terms.append((raw, target))
                if a.ik is not None:
                    self.ik_terms.append((raw, target, a.ik))
            raw_start, target_start = raw.stop, target.stop
        self.clip_low, self.clip_high = np.array(low), np.array(high)
        self.kinds = tuple(command_interface(a.type) for a in manifest.actions for _ in a.joints)
        """Per joint: POSITION, VELOCITY or EFFORT."""

    def reset(self) -> None:
        """Forget the tool-step terms' state: the next call starts them from the measured joints."""
        for _, _, ik in self.tool_terms:
            ik.reset()

    def __call__(self, raw: np.ndarray, joint_pos: np.ndarray | None = None,
                 commands: dict[str, np.ndarray] | None = None) -> np.ndarray:
        """(action_dim,) raw action → (num_joints,) float64 targets; `ik_residual` and `tool_step` terms also read
        the measured positions of the policy joints (num_joints,) [rad], `ik_residual` terms the commands by name."""
        if ((self.ik_terms or self.tool_terms) and joint_pos is None) or (self.ik_terms and commands is None):
            raise ValueError("ik_residual action terms need the joint positions and the commands, tool_step terms the "
                             "joint positions")
        step = self.scale * np.clip(raw, self.clip_low, self.clip_high)
        target = self.offset.copy()
        for raw_part, part in self.plain_terms:
            target[part] += step[raw_part]
        for _, part, ik in self.ik_terms:
            q = np.asarray(joint_pos[part], dtype=np.float64)
            goal = np.asarray(commands[ik.command], dtype=np.float64)
            rot = quat_to_matrix(canonical_pose(goal)[3:]) if ik.orientation_weight > 0 else None
            target[part] += q + ik.chain.dls_step(q, goal[:3], ik.damping, rot, ik.orientation_weight)
        for raw_part, part, tool in self.tool_terms:
            target[part] = tool(step[raw_part], np.asarray(joint_pos[part], dtype=np.float64))
        return np.minimum(np.maximum(target, self.ctrl_low), self.ctrl_high)
