# SPDX-License-Identifier: BSD-3-Clause
"""The runtime's control law: robot inputs → policy observation(s) → ONNX → joint targets.

`OneLevel` runs one policy. `TwoLevels` runs a two-level policy (`batonlab.deploy.levels`) as training's
`WholeBodyPolicyAction` does: the upper level observes and acts; its command layer turns its actions into the lower
level's commands; the lower level observes (with those commands) and acts; the targets are the lower level's joints',
then the upper level's own (the gripper). Each level keeps its own last action, as each was trained with its own.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from batonlab.deploy.actions import ActionProcessor
from batonlab.deploy.levels import CommandLayer, command_layer_of
from batonlab.deploy.manifest import Manifest
from batonlab.deploy.observation import ObsContext, ObservationBuilder, RobotInputs


def control_law(manifest: Manifest, ctx: ObsContext | None = None, policy=None) -> OneLevel | TwoLevels:
    """The control law of a manifest: `TwoLevels` for a joined two-level manifest, else `OneLevel`."""
    ctx = ctx if ctx is not None else ObsContext(manifest)
    return OneLevel(manifest, ctx, policy) if manifest.levels is None else TwoLevels(manifest, ctx, policy)


def input_context(manifest: Manifest) -> ObsContext:
    """The joints, sensors and commands a manifest's policy reads, its observation terms built (no ONNX file loaded)."""
    ctx = ObsContext(manifest)
    if manifest.levels is None:
        ObservationBuilder(manifest, ctx)
    else:
        TwoLevels.observations(manifest, ctx)
    return ctx


class OneLevel:
    """One policy: observation → raw action → targets (`ActionProcessor`).

    Args:
        manifest: A single-level manifest.
        ctx: The runtime's observation context (the joints and inputs it collects).
        policy: obs (obs_dim,) → raw action (action_dim,); default `OnnxPolicy(manifest)`.
    """

    def __init__(self, manifest: Manifest, ctx: ObsContext, policy=None):
        self.observation = ObservationBuilder(manifest, ctx)
        self.policy = policy if policy is not None else _onnx(manifest)
        self.actions = ActionProcessor(manifest)
        self.kinds = self.actions.kinds

    def reset(self) -> None:
        """A fresh start: no past frames, no tool command."""
        self.observation.reset()
        self.actions.reset()

    def replay(self, obs: np.ndarray) -> np.ndarray:
        """The raw action (action_dim,) of a logged observation (obs_dim,)."""
        return np.asarray(self.policy(obs), dtype=np.float32)

    def act(self, inputs: RobotInputs, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(observation, raw action, targets of the policy joints or None when the raw action is not finite)."""
        obs = self.observation.compute(inputs)
        raw = np.asarray(self.policy(obs), dtype=np.float32)
        if not np.isfinite(raw).all():
            return obs, raw, None
        return obs, raw, self.actions(raw, q, inputs.vectors)


class TwoLevels:
    """A two-level policy: the upper level's observation and raw action, its command layer, then the lower level's.

    The observation it reports is the upper level's then the lower level's (the joined manifest's `upper/…`,
    `lower/…` terms); the raw action, the joint-level one: the lower level's, then the upper level's joint terms'
    (the joined manifest's action terms).

    Args:
        manifest: A joined manifest (`manifest.levels` is (upper, lower)).
        ctx: The runtime's observation context: both levels read the joints and sensors it collects; commands that
            the layer gives are the lower level's own, not inputs.
        policy: (upper, lower) callables obs → raw action; default their `OnnxPolicy`.
    """

    def __init__(self, manifest: Manifest, ctx: ObsContext, policy=None):
        upper, lower = manifest.levels
        self.layer = CommandLayer(command_layer_of(upper), lower, upper.obs_terms)
        self.upper_obs, self.lower_obs = self.observations(manifest, ctx)
        upper_policy, lower_policy = policy if policy is not None else (_onnx(upper), _onnx(lower))
        self.policies = (upper_policy, lower_policy)
        self.upper_actions, self.lower_actions = ActionProcessor(upper), ActionProcessor(lower)
        self.kinds = (*self.lower_actions.kinds, *self.upper_actions.kinds)
        self.upper_last = np.zeros(upper.action_dim, dtype=np.float32)
        self.lower_last = np.zeros(lower.action_dim, dtype=np.float32)
        self.upper_joint_raw = np.array([i for a, t in _starts(upper.actions) if t.command_layer is None
                                         for i in range(a, a + t.width)], dtype=np.intp)
        """Indices of the upper raw action that its joint terms read (the rest is the command layer's)."""
        start, term = next((a, t) for a, t in _starts(upper.actions) if t.command_layer is not None)
        self.layer_raw = slice(start, start + term.width)
        self.num_lower_joints = len(lower.joint_names)
        self.commands: dict[str, np.ndarray] = {}
        """The lower level's commands of the last step, by name."""

    @staticmethod
    def observations(manifest: Manifest, ctx: ObsContext) -> tuple[ObservationBuilder, ObservationBuilder]:
        """The (upper, lower) observation builders of a joined manifest; the joints, sensors and outside commands
        they read are added to `ctx`."""
        upper, lower = manifest.levels
        driven = command_layer_of(upper).commands
        shared = {"joints": ctx.joints, "sensors": ctx.sensors, "poses": ctx.poses}
        upper_obs = ObservationBuilder(upper, ObsContext(upper, commands=ctx.commands, **shared))
        lower_obs = ObservationBuilder(lower, ObsContext(lower, **shared))
        for name, dim in lower_obs.ctx.commands.items():  # commands the lower level reads that the layer does not give
            if name not in driven:
                ctx.commands[name] = dim
        ctx.uses_joint_vel |= upper_obs.ctx.uses_joint_vel or lower_obs.ctx.uses_joint_vel
        return upper_obs, lower_obs

    def reset(self) -> None:
        """A fresh start: no past frames and no last action at either level, no tool command."""
        for part in (self.upper_obs, self.lower_obs, self.upper_actions, self.lower_actions):
            part.reset()
        self.upper_last[:] = 0.0
        self.lower_last[:] = 0.0

    def replay(self, obs: np.ndarray) -> np.ndarray:
        """The joint-level raw action of a logged observation (both levels', as `act` reports them)."""
        upper_policy, lower_policy = self.policies
        width = self.upper_obs.manifest.obs_dim
        upper_raw = np.asarray(upper_policy(obs[:width]), dtype=np.float32)
        lower_raw = np.asarray(lower_policy(obs[width:]), dtype=np.float32)
        return np.concatenate([lower_raw, upper_raw[self.upper_joint_raw]])

    def act(self, inputs: RobotInputs, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        """(both observations, the joint-level raw action, targets of both levels' joints or None when a raw action
        is not finite); always of the joined manifest's widths (a level that did not run: NaN)."""
        upper_policy, lower_policy = self.policies
        upper_obs = self.upper_obs.compute(dataclasses.replace(inputs, last_action=self.upper_last))
        upper_raw = np.asarray(upper_policy(upper_obs), dtype=np.float32)
        if not np.isfinite(upper_raw).all():  # the lower level does not run: its part of both is NaN
            lower_obs = np.full(self.lower_obs.manifest.obs_dim, np.nan, dtype=np.float32)
            lower_raw = np.full(self.lower_last.shape, np.nan, dtype=np.float32)
            return (np.concatenate([upper_obs, lower_obs]), np.concatenate([lower_raw, upper_raw[self.upper_joint_raw]]),
                    None)
        self.upper_last[:] = upper_raw
        self.commands = self.layer(upper_raw[self.layer_raw], upper_obs)
        vectors = {**inputs.vectors, **self.commands}
        lower_obs = self.lower_obs.compute(RobotInputs(inputs.joint_pos, inputs.joint_vel, vectors, self.lower_last))
        lower_raw = np.asarray(lower_policy(lower_obs), dtype=np.float32)
        obs = np.concatenate([upper_obs, lower_obs])
        raw = np.concatenate([lower_raw, upper_raw[self.upper_joint_raw]])
        if not np.isfinite(lower_raw).all():
            return obs, raw, None
        self.lower_last[:] = lower_raw
        lower_q, upper_q = q[: self.num_lower_joints], q[self.num_lower_joints:]
        targets = np.concatenate([self.lower_actions(lower_raw, lower_q, vectors),
                                  self.upper_actions(upper_raw, upper_q, vectors)])
        return obs, raw, targets


def _starts(actions):
    """(first raw index, term) of each action term."""
    start = 0
    for term in actions:
        yield start, term
        start += term.width


def _onnx(manifest: Manifest):
    from batonlab.deploy.policy import OnnxPolicy

    return OnnxPolicy(manifest)
