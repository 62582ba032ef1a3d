# SPDX-License-Identifier: BSD-3-Clause
"""A two-level policy on the robot: an upper level whose actions are commands (a `whole_body_commands` term) and the
lower-level whole-body policy that turns them into joint targets.

An export of such a policy is the upper level's `policy.onnx` and `manifest.json`, with the lower level's own export
(its ONNX file and manifest, unchanged) in the folder its command layer names (`lower/`). `load_manifest` reads both
and joins them (`join_levels`) into the joint-level contract the robot side works with: the joints of both levels
(the lower level's, then the upper level's own, e.g. the gripper), the sensors of both, the commands that still come
from outside, and both manifests in `levels` for the runtime's two control steps (`batonlab.deploy.control`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from batonlab.deploy.kinematics import quat_from_rotation_vector, quat_mul
from batonlab.deploy.manifest_json import ManifestError
from batonlab.deploy.manifest_robot import HeldJoints
from batonlab.deploy.manifest_sections import ActuatedJoints, CommandLayerSpec
from batonlab.deploy.pose import canonical_pose

LOWER_FOLDER = "lower"
"""Where an export puts the lower level's export, next to the upper level's manifest."""

VELOCITY_FIELDS = ("lin_vel_x", "ang_vel_z")
"""The leading fields of the velocity command a command layer drives."""


class CommandLayer:
    """The numpy twin of training's `WholeBodyCommandAction.commands`: raw actions (width,) → the lower level's commands.

    Args:
        spec: The command layer's section of the upper manifest.
        lower: The lower level's manifest, whose commands the layer drives.
        upper_obs_terms: The upper level's observation layout (`ObsTermLayout`s), where the layer's anchors lie.

    Raises:
        ManifestError: the lower level has no such commands, or not of the shape the layer gives them; an anchor is
            not an upper observation term of the right width.
    """

    def __init__(self, spec: CommandLayerSpec, lower, upper_obs_terms=()):
        self.spec = spec
        self.anchors = []
        """(origin columns, the upper observation's columns they take, the term's scale) per anchor."""
        for name, columns, widths in ((spec.anchor, slice(0, 3), (3, 7)), (spec.orientation_anchor, slice(3, 7), (7,))):
            if name is not None:
                frame, scale = anchor_columns(upper_obs_terms, name, widths)
                start = frame.start + (columns.start if frame.stop - frame.start == 7 else 0)
                self.anchors.append((columns, slice(start, start + columns.stop - columns.start), scale))
        if spec.orientation_anchor is not None and not spec.orientation:
            raise ManifestError("command layer: an orientation_anchor needs a pose command (stowed of 7 values)")
        base, ee = lower.commands.get(spec.base_command), lower.commands.get(spec.ee_command)
        for name, command in ((spec.base_command, base), (spec.ee_command, ee)):
            if command is None:
                raise ManifestError(f"the command layer drives command '{name}', which the lower level's manifest "
                                    f"({lower.task}) does not have (its commands: {list(lower.commands)})")
        if base.dim < 2 or (base.fields and tuple(base.fields[:2]) != VELOCITY_FIELDS):
            raise ManifestError(f"the lower level's command '{spec.base_command}' has fields {list(base.fields)}; the "
                                f"command layer gives a speed and a yaw rate first {list(VELOCITY_FIELDS)}")
        if base.dim > 2 and base.default is None:
            raise ManifestError(f"the lower level's command '{spec.base_command}' has no default for its fields beyond "
                                "the speed and yaw rate, which the command layer holds there")
        if ee.dim != len(spec.stowed) or (spec.orientation and not ee.pose):
            raise ManifestError(f"the lower level's command '{spec.ee_command}' has {ee.dim} values; the command "
                                f"layer gives it {'a pose' if spec.orientation else 'a position'} "
                                f"({len(spec.stowed)} values)")
        self.base_rest = np.array(base.default if base.default is not None else (0.0, 0.0), dtype=np.float64)
        self.stowed = np.array(spec.stowed, dtype=np.float64)

    def origin(self, obs: np.ndarray | None) -> np.ndarray:
        """(3,) or (7,) the tool pose zero actions command: the stowed one, with the anchors' newest frames in the
        upper observation `obs` in their place [m, w x y z, arm base frame]."""
        origin = self.stowed.copy()
        if self.anchors and obs is None:
            raise ValueError("this command layer is anchored to the upper observation; pass it")
        for columns, where, scale in self.anchors:
            part = np.asarray(obs[where], dtype=np.float64) / scale
            origin[columns] = part if columns.start == 0 else part / max(np.linalg.norm(part), 1e-6)
        return origin

    def __call__(self, raw: np.ndarray, obs: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """Raw actions (width,) about the origin of the upper observation `obs` → {velocity command: (lin_vel_x [m/s],
        ang_vel_z [rad/s], default beyond), tool command: position [m, arm base frame] (+ quaternion w x y z, w ≥ 0)}."""
        spec, a = self.spec, np.clip(np.asarray(raw, dtype=np.float64), -1.0, 1.0)
        origin = self.origin(obs)
        base = self.base_rest.copy()
        base[:2] = spec.speed_scale * a[0], spec.yaw_rate_scale * a[1]
        position = origin[:3] + spec.position_scale * a[2:5]
        if not spec.orientation:
            return {spec.base_command: base, spec.ee_command: position}
        quat = quat_mul(quat_from_rotation_vector(spec.orientation_scale * a[5:8]), origin[3:])
        return {spec.base_command: base, spec.ee_command: canonical_pose(np.concatenate([position, quat]))}


def anchor_columns(obs_terms, name: str, widths: tuple[int, ...]) -> tuple[slice, float]:
    """(the columns of term `name`'s newest frame in an observation of layout `obs_terms`, its scale).

    Raises:
        ManifestError: no such term, or its frame is not one of `widths` wide.
    """
    start = 0
    for term in obs_terms:
        if term.name == name:
            if term.size not in widths:
                raise ManifestError(f"command layer: anchor '{name}' is {term.size} wide; it must be "
                                    f"{' or '.join(map(str, widths))} wide (a position, or a pose: position, w x y z)")
            newest = start + term.width - term.size
            return slice(newest, newest + term.size), term.scale
        start += term.width
    raise ManifestError(f"command layer: anchor '{name}' is not an upper observation term; they are "
                        f"{[t.name for t in obs_terms]}")


def command_layer_of(manifest) -> CommandLayerSpec | None:
    """The command layer of a manifest's action terms (None: a single-level policy).

    Raises:
        ManifestError: more than one command layer.
    """
    layers = [a.command_layer for a in manifest.actions if a.command_layer is not None]
    if len(layers) > 1:
        raise ManifestError(f"{len(layers)} command layers; a policy drives one lower level")
    return layers[0] if layers else None


def join_levels(upper, lower):
    """The joint-level manifest of `upper` (with a command layer) over `lower` (a single-level whole-body policy).

    Joints: the lower level's, then the upper level's own (their action terms follow the lower level's); held joints:
    both levels' that neither drives; sensors: both levels'; commands: those that still come from outside (not the
    two the layer drives); observation terms: the upper level's then the lower level's, named `upper/…`, `lower/…`
    (the runtime records both observations in that order); the safe stop: the lower level's (the whole body's).

    Raises:
        ManifestError: the two levels do not fit together (see the messages).
    """
    layer = command_layer_of(upper)
    if layer is None:
        raise ManifestError("the upper level has no command layer (a `whole_body_commands` action term)")
    if command_layer_of(lower) is not None or lower.levels is not None:
        raise ManifestError(f"the lower level ({lower.task}) is itself the upper level of a hierarchy")
    if (upper.control.physics_dt, upper.control.decimation) != (lower.control.physics_dt, lower.control.decimation):
        raise ManifestError(f"the upper level runs every {upper.control_dt:g} s, the lower level ({lower.task}) every "
                            f"{lower.control_dt:g} s; both levels run at one control step")
    CommandLayer(layer, lower, upper.obs_terms)  # the lower level takes the commands the layer gives, anchors exist
    driven = layer.commands
    own = [a for a in upper.actions if a.command_layer is None]
    both = sorted(set(upper.joint_names) & set(lower.joint_names))
    if both:
        raise ManifestError(f"joints {both} are driven by both levels")
    sensors = dict(lower.sensors)
    for name, spec in upper.sensors.items():
        if name in sensors and (sensors[name].dim, sensors[name].type) != (spec.dim, spec.type):
            raise ManifestError(f"sensor '{name}' is a {spec.type} of {spec.dim} values for the upper level and a "
                                f"{sensors[name].type} of {sensors[name].dim} for the lower level")
        sensors.setdefault(name, spec)
    commands = {name: c for level in (lower, upper) for name, c in level.commands.items() if name not in driven}
    joints = [upper.joints, lower.joints]
    names = (*lower.joint_names, *upper.joint_names)
    return dataclasses.replace(
        upper,
        joints=ActuatedJoints(
            names=names,
            pos_limits=lower.joints.pos_limits + upper.joints.pos_limits,
            ctrl_range=lower.joints.ctrl_range + upper.joints.ctrl_range,
            torque_limits=lower.joints.torque_limits + upper.joints.torque_limits,
            kp=lower.joints.kp + upper.joints.kp,
            kd=lower.joints.kd + upper.joints.kd,
            gravity_compensation=any(j.gravity_compensation for j in joints),
        ),
        default_joint_pos={**lower.default_joint_pos, **upper.default_joint_pos},
        actions=(*lower.actions, *own),
        obs_terms=tuple(dataclasses.replace(t, name=f"{level}/{t.name}")
                        for level, manifest in (("upper", upper), ("lower", lower)) for t in manifest.obs_terms),
        commands=commands,
        sensors=sensors,
        held_joints=_held_by_neither(names, lower.held_joints, upper.held_joints),
        stop=lower.stop,
        levels=(upper, lower),
    )


def _held_by_neither(driven: tuple[str, ...], *held: HeldJoints) -> HeldJoints:
    """The held joints of both levels that neither level drives (each once, the first level's entry kept)."""
    keep: dict[str, tuple] = {}
    for h in held:
        for row in zip(h.names, h.targets, h.pos_limits, h.torque_limits, h.kp, h.kd):
            if row[0] not in driven:
                keep.setdefault(row[0], row)
    if not keep:
        return HeldJoints()
    names, targets, pos_limits, torque_limits, kp, kd = zip(*keep.values())
    return HeldJoints(names, targets, pos_limits, torque_limits, kp, kd)
