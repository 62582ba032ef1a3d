# SPDX-License-Identifier: BSD-3-Clause
"""The sections of a manifest (`batonlab.deploy.manifest.Manifest`), each typed, with its JSON form.

Numbers JSON cannot hold are ±inf here and null in JSON (unlimited bounds). `from_json` errors name
the field; `parse_manifest` puts the file in front.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

import numpy as np

from batonlab.deploy.kinematics import KinematicChain
from batonlab.deploy.manifest_json import ManifestError, bounds, clip_range, finite_or_null, numbers, required, required_number
from batonlab.deploy.pose import POSE_FIELDS

ACTION_TYPES = ("joint_position", "joint_velocity", "joint_effort", "ik_residual", "tool_step", "whole_body_commands")
"""Action term types this runtime can post-process."""

COMMAND_LAYER_TYPE = "whole_body_commands"
"""The action type of a command layer: its raw actions are commands to a lower-level policy, not joint targets."""

POSITION_ACTION_TYPES = ("joint_position", "ik_residual", "tool_step")
"""Action types whose targets are joint positions (the command filter's rate applies to them)."""


@dataclass(frozen=True)
class IKSpec:
    """An `ik_residual` term's IK step: `target = q + chain.dls_step(q, commands[command], damping) + scale * raw`."""

    command: str
    """The command the tool point goes to: a position (its first 3 values) in the chain's base frame [m], then, for
    a pose command, the orientation quaternion (w, x, y, z) the step also turns toward when `orientation_weight` > 0."""
    damping: float
    """Damped least-squares damping [m]."""
    chain: KinematicChain
    orientation_weight: float = 0.0
    """Metres per radian of orientation error in the step; 0: position only."""

    def to_json(self) -> dict[str, Any]:
        """The IK step as a JSON object."""
        return {"command": self.command, "damping": self.damping, "orientation_weight": self.orientation_weight,
                "chain": self.chain.to_json()}

    @classmethod
    def from_json(cls, data: Any, label: str) -> IKSpec:
        """The IK step of the JSON object at `label` (`orientation_weight` absent: 0, as before it existed)."""
        if not isinstance(data, dict):
            raise ManifestError(f"field '{label}' should be an object (command, damping, chain), got {type(data).__name__}")
        damping = required_number(data, label, "damping")
        if not (math.isfinite(damping) and damping > 0.0):
            raise ManifestError(f"field '{label}.damping' should be a finite number > 0 [m], got {damping}")
        weight = required_number(data, label, "orientation_weight") if "orientation_weight" in data else 0.0
        if not (math.isfinite(weight) and weight >= 0.0):
            raise ManifestError(f"field '{label}.orientation_weight' should be a finite number >= 0 [m/rad], got {weight}")
        return cls(command=required(data, label, "command", str), damping=float(damping),
                   chain=KinematicChain.from_json(data.get("chain"), f"{label}.chain"), orientation_weight=float(weight))


TOOL_STEP_WIDTH = 6
"""Raw actions of a `tool_step` term: a step of the commanded tool point (3), then a turn of the tool (3)."""


@dataclass(frozen=True)
class ToolStepSpec:
    """A `tool_step` term's IK: the commanded tool point moves by the term's scaled `raw[:3]` [m] and stays within
    `max_lead` of the measured tool point; the goal rotation is the measured one turned by the rotation vector
    `raw[3:]` scaled [rad]; the targets are `iterations` half damped least-squares steps from the last ones, each
    kept inside `joint_limits`; base frame of the chain."""

    chain: KinematicChain
    max_lead: float
    """Largest distance of the commanded tool point from the measured one [m]."""
    iterations: int
    damping: float
    """Damped least-squares damping [m]."""
    rotation_weight: float
    """Metres per radian of rotation error in the IK."""
    joint_limits: tuple[tuple[float, float], ...]
    """Per chain joint, the range the IK keeps its solution in [rad]."""

    def to_json(self) -> dict[str, Any]:
        """The tool-step IK as a JSON object."""
        return {"max_lead": self.max_lead, "iterations": self.iterations, "damping": self.damping,
                "rotation_weight": self.rotation_weight, "joint_limits": [list(r) for r in self.joint_limits],
                "chain": self.chain.to_json()}

    @classmethod
    def from_json(cls, data: Any, label: str) -> ToolStepSpec:
        """The tool-step IK of the JSON object at `label`; a clear `ManifestError` for anything malformed."""
        if not isinstance(data, dict):
            raise ManifestError(f"field '{label}' should be an object (chain, max_lead, iterations, damping, "
                                f"rotation_weight, joint_limits), got {type(data).__name__}")
        values = {}
        for key in ("max_lead", "damping", "rotation_weight"):
            value = required_number(data, label, key)
            if not (math.isfinite(value) and (value > 0.0 or (key == "rotation_weight" and value == 0.0))):
                raise ManifestError(f"field '{label}.{key}' should be a finite number > 0, got {value}")
            values[key] = value
        iterations = required(data, label, "iterations", int)
        if iterations < 1:
            raise ManifestError(f"field '{label}.iterations' should be an integer >= 1, got {iterations}")
        chain = KinematicChain.from_json(data.get("chain"), f"{label}.chain")
        limits = bounds(required(data, label, "joint_limits", list), f"{label}.joint_limits")
        if len(limits) != len(chain.joints) or any(not (lo < hi) for lo, hi in limits):
            raise ManifestError(f"field '{label}.joint_limits' should hold one [low, high] pair with low < high per "
                                f"chain joint ({len(chain.joints)}), got {len(limits)}")
        return cls(chain=chain, iterations=iterations, joint_limits=limits, **values)


@dataclass(frozen=True)
class CommandLayerSpec:
    """A `whole_body_commands` term: raw actions (5 or 8, clipped to [-1, 1]) → the lower level's commands, as training's
    `WholeBodyCommandAction.commands` computes them; the lower level's export lies in the folder `lower`."""

    lower: str
    """Folder of the lower level's export, relative to this manifest's folder."""
    base_command: str
    """The lower level's velocity command: `(speed_scale · a0 [m/s], yaw_rate_scale · a1 [rad/s], its default beyond)`."""
    ee_command: str
    """The lower level's tool command: `stowed position + position_scale · a2:5` [m], then, for a pose, the
    orientation `exp(orientation_scale · a5:8) ⊗ stowed`."""
    speed_scale: float
    yaw_rate_scale: float
    position_scale: float
    orientation_scale: float
    stowed: tuple[float, ...]
    """The tool command that zero actions hold (3 values, or 7 for a pose: position [m], quaternion w x y z)."""
    anchor: str | None = None
    """An upper observation term (a position, or a pose's first 3 values) whose newest frame replaces the stowed
    position as what zero position actions hold [m, arm base frame]."""
    orientation_anchor: str | None = None
    """An upper observation term (a pose: position, w x y z) whose newest frame's orientation replaces the stowed one."""

    def __post_init__(self):
        if len(self.stowed) not in (3, 7):
            raise ManifestError(f"command layer: stowed has {len(self.stowed)} values; 3 (a position) or 7 (a pose)")
        if not all(math.isfinite(v) for v in (self.speed_scale, self.yaw_rate_scale, self.position_scale,
                                              self.orientation_scale, *self.stowed)):
            raise ManifestError("command layer: its scales and stowed pose must be finite")
        folder = PurePosixPath(self.lower)
        if not self.lower or folder.is_absolute() or ".." in folder.parts:
            raise ManifestError(f"command layer: lower {self.lower!r} must be a folder inside the export folder")

    @property
    def commands(self) -> tuple[str, str]:
        """The lower level's commands it gives: (velocity, tool)."""
        return self.base_command, self.ee_command

    @property
    def orientation(self) -> bool:
        """The tool command is a pose (its width is 7)."""
        return len(self.stowed) == 7

    @property
    def width(self) -> int:
        """Raw actions: speed, yaw rate, tool position, then a rotation vector for a pose."""
        return 8 if self.orientation else 5

    def to_json(self) -> dict[str, Any]:
        """The command layer as a JSON object."""
        return {"lower": self.lower, "base_command": self.base_command, "ee_command": self.ee_command,
                "speed_scale": self.speed_scale, "yaw_rate_scale": self.yaw_rate_scale,
                "position_scale": self.position_scale, "orientation_scale": self.orientation_scale,
                "stowed": list(self.stowed),
                **{key: value for key, value in (("anchor", self.anchor), ("orientation_anchor", self.orientation_anchor))
                   if value is not None}}

    @classmethod
    def from_json(cls, data: Any, label: str) -> CommandLayerSpec:
        """The command layer of the JSON object at `label`."""
        if not isinstance(data, dict):
            raise ManifestError(f"field '{label}' should be an object, got {type(data).__name__}")
        return cls(required(data, label, "lower", str), required(data, label, "base_command", str),
                   required(data, label, "ee_command", str),
                   *(required_number(data, label, key) for key in ("speed_scale", "yaw_rate_scale", "position_scale",
                                                                   "orientation_scale")),
                   numbers(required(data, label, "stowed", list), f"{label}.stowed"),
                   *(_optional_name(data, label, key) for key in ("anchor", "orientation_anchor")))


def _optional_name(data: dict, label: str, key: str) -> str | None:
    """`data[key]`, a non-empty string, or None where absent."""
    value = data.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ManifestError(f"field '{label}.{key}' should be a non-empty string or absent, got {value!r}")
    return value


@dataclass(frozen=True)
class PolicyFile:
    """The ONNX file: input `input_name` (batch, obs_dim) float32 → output `output_name` (batch, action_dim)."""

    file: str = "policy.onnx"
    """File name, relative to the manifest."""
    input_name: str = "obs"
    output_name: str = "actions"
    sha256: str | None = None
    """Hash of the file; filled in by the export writer once the file is written."""

    def to_json(self) -> dict[str, Any]:
        """The policy file section as a JSON object."""
        return {"file": self.file, "sha256": self.sha256, "input_name": self.input_name, "output_name": self.output_name}

    @classmethod
    def from_json(cls, data: dict) -> PolicyFile:
        """The policy file section of the manifest's `policy` object (`sha256` may be null)."""
        sha256 = data.get("sha256")
        if sha256 is not None and not isinstance(sha256, str):
            raise ManifestError(f"field 'policy.sha256' should be str or null, got {type(sha256).__name__}")
        return cls(required(data, "policy", "file", str), required(data, "policy", "input_name", str),
                   required(data, "policy", "output_name", str), sha256)


@dataclass(frozen=True)
class ControlTiming:
    """The control period as the simulator ran it: `decimation` physics steps per policy step."""

    physics_dt: float
    """Physics step [s]."""
    decimation: int
    """Physics steps per control step."""

    def __post_init__(self):
        if not self.physics_dt > 0 or self.decimation < 1:
            raise ManifestError(f"control.physics_dt must be > 0 and control.decimation >= 1, got {self.physics_dt} and "
                                f"{self.decimation}")

    @property
    def dt(self) -> float:
        """Control period [s] (what the env calls `step_dt`)."""
        return self.physics_dt * self.decimation

    @property
    def rate_hz(self) -> float:
        """Control rate [Hz], the inverse of `dt`."""
        return 1.0 / self.dt

    def to_json(self) -> dict[str, Any]:
        """The control timing as a JSON object."""
        return {"physics_dt": self.physics_dt, "decimation": self.decimation}

    @classmethod
    def from_json(cls, data: dict) -> ControlTiming:
        """The control timing of the manifest's `control` object."""
        return cls(required_number(data, "control", "physics_dt"), required(data, "control", "decimation", int))


@dataclass(frozen=True)
class ActuatedJoints:
    """The joints the policy commands, in policy (action) order, with their actuators' properties.

    Unlimited bounds are ±inf here and null in JSON.
    """

    names: tuple[str, ...]
    pos_limits: tuple[tuple[float, float], ...]
    """Joint position range [rad or m]."""
    ctrl_range: tuple[tuple[float, float], ...]
    """Actuator control range: the simulator clamps the targets into it [rad or m, rad/s, N·m]."""
    torque_limits: tuple[float, ...]
    """Actuator force limits [N·m or N]."""
    kp: tuple[float, ...]
    """Position gains of the PD actuators used in training [N·m/rad]."""
    kd: tuple[float, ...]
    """Damping gains [N·m·s/rad]."""
    gravity_compensation: bool = False
    """The policy was trained with the robot's weight cancelled by its servos (a feed-forward torque within
    their limits); the robot's joint controllers must compensate gravity too."""

    def __post_init__(self):
        n = len(self.names)
        if len(set(self.names)) != n:
            raise ManifestError(f"joints.names has duplicates: {sorted({j for j in self.names if self.names.count(j) > 1})}")
        for key in ("pos_limits", "ctrl_range", "torque_limits", "kp", "kd"):
            if len(getattr(self, key)) != n:
                raise ManifestError(f"joints.{key} has {len(getattr(self, key))} values for {n} joints")

    def to_json(self) -> dict[str, Any]:
        """The actuated joints as a JSON object, unlimited bounds written as null."""
        def pairs(values):
            return [[finite_or_null(lo), finite_or_null(hi)] for lo, hi in values]

        return {"names": list(self.names), "pos_limits": pairs(self.pos_limits), "ctrl_range": pairs(self.ctrl_range),
                "torque_limits": [finite_or_null(v) for v in self.torque_limits], "kp": list(self.kp), "kd": list(self.kd),
                "gravity_compensation": self.gravity_compensation}

    @classmethod
    def from_json(cls, data: dict) -> ActuatedJoints:
        """The actuated joints of the manifest's `joints` object, null bounds and torque limits read as ±inf."""
        def get(key):
            return required(data, "joints", key, list)

        compensated = data.get("gravity_compensation", False)
        if not isinstance(compensated, bool):
            raise ManifestError(f"joints.gravity_compensation must be true or false, got {compensated!r}")
        return cls(names=tuple(get("names")), pos_limits=bounds(get("pos_limits"), "joints.pos_limits"),
                   ctrl_range=bounds(get("ctrl_range"), "joints.ctrl_range"),
                   torque_limits=numbers(get("torque_limits"), "joints.torque_limits", null=np.inf),
                   kp=numbers(get("kp"), "joints.kp"), kd=numbers(get("kd"), "joints.kd"),
                   gravity_compensation=compensated)


@dataclass(frozen=True)
class ActionTerm:
    """One action term: `target = offset + scale * clip(raw)` for its joints, where the offset is the
    joints' default position (`use_default_offset`) or zero (an `ik_residual` term's: its IK step; a
    `tool_step` term's targets are its IK's solution for the scaled step, `ToolStepSpec`)."""

    name: str
    type: str
    """One of `ACTION_TYPES`."""
    joints: tuple[str, ...]
    scale: tuple[float, ...]
    """Per raw action (`width`): per joint, or for `tool_step` three position steps [m] then three turns [rad]."""
    clip: tuple[float, float] | None
    """Range of the raw action before scaling (None: unclipped)."""
    use_default_offset: bool
    """Targets are relative to the default pose (position terms), else to zero."""
    max_target_rate: float | None = None
    """Position terms trained under the command filter: targets moved at most this fast [rad/s or m/s], after
    the PD torque window (the safety filter's run-state rule); None: trained without it."""
    ik: IKSpec | None = None
    """`ik_residual` terms: the IK step the residual is added to (its chain's hinges are the term's joints)."""
    tool_step: ToolStepSpec | None = None
    """`tool_step` terms: the IK that turns tool steps into the joints' targets."""
    command_layer: CommandLayerSpec | None = None
    """`whole_body_commands` terms (no joints): the commands their raw actions give the lower level."""

    def __post_init__(self):
        if self.type not in ACTION_TYPES:
            raise ManifestError(f"action term '{self.name}': type '{self.type}' is not supported; known types: {list(ACTION_TYPES)}")
        if self.command_layer is not None and self.joints:
            raise ManifestError(f"action term '{self.name}': a command layer drives no joints of its own, got "
                                f"{list(self.joints)}")
        if self.type == COMMAND_LAYER_TYPE and self.clip != (-1.0, 1.0):
            raise ManifestError(f"action term '{self.name}': a command layer's clip is [-1, 1], got {self.clip}")
        for section, kind, value in (("ik", "ik_residual", self.ik), ("tool_step", "tool_step", self.tool_step),
                                     ("command_layer", COMMAND_LAYER_TYPE, self.command_layer)):
            if (self.type == kind) != (value is not None):
                raise ManifestError(f"action term '{self.name}' of type '{self.type}': a '{section}' section belongs "
                                    f"to, and only to, {kind} terms")
            if kind != COMMAND_LAYER_TYPE and value is not None and value.chain.joints != self.joints:
                raise ManifestError(f"action term '{self.name}': its IK chain moves {list(value.chain.joints)}, the "
                                    f"term drives {list(self.joints)}")
        if len(self.scale) != self.width:
            raise ManifestError(f"action term '{self.name}' has {len(self.scale)} scales for {self.width} actions")
        if self.tool_step is not None and self.clip != (-1.0, 1.0):
            raise ManifestError(f"action term '{self.name}': a tool_step term's clip is [-1, 1], got {self.clip}")
        if self.max_target_rate is not None and not (math.isfinite(self.max_target_rate) and self.max_target_rate > 0):
            raise ManifestError(f"action term '{self.name}': max_target_rate {self.max_target_rate} must be a finite "
                                "number > 0 [rad/s or m/s] or null")

    def to_json(self) -> dict[str, Any]:
        """The action term as a JSON object."""
        return {"name": self.name, "type": self.type, "joints": list(self.joints), "scale": list(self.scale),
                "clip": list(self.clip) if self.clip is not None else None, "use_default_offset": self.use_default_offset,
                "max_target_rate": self.max_target_rate, **({"ik": self.ik.to_json()} if self.ik is not None else {}),
                **({"tool_step": self.tool_step.to_json()} if self.tool_step is not None else {}),
                **({"command_layer": self.command_layer.to_json()} if self.command_layer is not None else {})}

    @property
    def width(self) -> int:
        """Raw actions of the term: one per joint, `TOOL_STEP_WIDTH` for a tool step, a command layer's own."""
        if self.command_layer is not None:
            return self.command_layer.width
        return TOOL_STEP_WIDTH if self.type == "tool_step" else len(self.joints)

    @classmethod
    def from_json(cls, data: dict, label: str) -> ActionTerm:
        """The action term of the JSON object at `label` (`max_target_rate` may be absent: exports before it)."""
        rate = data.get("max_target_rate")
        if rate is not None and (isinstance(rate, bool) or not isinstance(rate, (int, float))):
            raise ManifestError(f"field '{label}.max_target_rate' should be a number or null, got {rate!r}")
        return cls(name=required(data, label, "name", str), type=required(data, label, "type", str),
                   joints=tuple(required(data, label, "joints", list)),
                   scale=numbers(required(data, label, "scale", list), f"{label}.scale"),
                   clip=clip_range(data.get("clip"), f"{label}.clip"),
                   use_default_offset=required(data, label, "use_default_offset", bool),
                   max_target_rate=None if rate is None else float(rate),
                   ik=IKSpec.from_json(data["ik"], f"{label}.ik") if "ik" in data else None,
                   tool_step=ToolStepSpec.from_json(data["tool_step"], f"{label}.tool_step") if "tool_step" in data
                   else None,
                   command_layer=CommandLayerSpec.from_json(data["command_layer"], f"{label}.command_layer")
                   if "command_layer" in data else None)


RENAMED_OBS_FUNCS: dict[str, str] = {
    "batonlab.env.mdp:joint_pos_rel": "batonlab.observations.proprioception:joint_pos_rel",
    "batonlab.env.mdp:joint_vel": "batonlab.observations.proprioception:joint_vel",
    "batonlab.env.mdp:last_action": "batonlab.observations.proprioception:last_action",
    "batonlab.env.mdp:generated_command": "batonlab.observations.commands:generated_command",
    "batonlab.env.mdp:sensor": "batonlab.observations.sensors:sensor",
    "batonlab.env.mdp:sensor_pose": "batonlab.observations.sensors:sensor_pose",
    "batonlab.env.mdp_locomotion:projected_gravity": "batonlab.observations.sensors:projected_gravity",
}
"""Observation functions of manifests written before the term libraries moved out of `batonlab.env` → their names now."""


@dataclass(frozen=True)
class ObsTermLayout:
    """One observation term: where it sits in its group's vector and how it was processed.

    Training's `ObservationManager` fills one per term, the export writes them, and
    `batonlab.deploy.observation` rebuilds each term from it: value → (noise, training only) →
    clip → scale → history.
    """

    name: str
    func: str
    """Training function as "module:qualname", e.g. "batonlab.observations.proprioception:joint_pos_rel"."""
    params: dict[str, Any]
    """The function's parameters, as plain JSON data."""
    size: int
    """Width of one frame."""
    history_length: int
    """Stacked frames (0: the current frame only)."""
    scale: float
    clip: tuple[float, float] | None
    noise_std: float = 0.0
    """Std of the noise added before clipping when the group is corrupted (training); the robot adds none."""

    def __post_init__(self):
        if self.size < 1 or self.history_length < 0:
            raise ManifestError(f"observation term '{self.name}' has size {self.size} and history_length {self.history_length}")

    @property
    def width(self) -> int:
        """Columns the term occupies in the observation vector."""
        return self.size * max(1, self.history_length)

    def to_json(self) -> dict[str, Any]:
        """The observation term's layout as a JSON object."""
        return {"name": self.name, "func": self.func, "params": self.params, "size": self.size,
                "history_length": self.history_length, "scale": self.scale,
                "clip": list(self.clip) if self.clip is not None else None, "noise_std": self.noise_std}

    @classmethod
    def from_json(cls, data: dict, label: str) -> ObsTermLayout:
        """The observation term's layout of the JSON object at `label`, renamed functions mapped to their new paths."""
        params = data.get("params") or {}
        if not isinstance(params, dict):
            raise ManifestError(f"field '{label}.params' should be an object, got {type(params).__name__}")
        func = required(data, label, "func", str)
        return cls(name=required(data, label, "name", str), func=RENAMED_OBS_FUNCS.get(func, func), params=dict(params),
                   size=required(data, label, "size", int), history_length=required(data, label, "history_length", int),
                   scale=required_number(data, label, "scale"), clip=clip_range(data.get("clip"), f"{label}.clip"),
                   noise_std=float(data.get("noise_std") or 0.0))


@dataclass(frozen=True)
class CommandSpec:
    """A command term of the task (a target, a velocity), received from outside on the robot."""

    type: str
    """Training class name, e.g. "UniformPositionCommand"."""
    dim: int
    fields: tuple[str, ...] = ()
    """Names of the components, e.g. ("lin_vel_x", "ang_vel_z", "height"); empty in older manifests."""
    default: tuple[float, ...] | None = None
    """The value before (or without) an operator, e.g. standing still; None: required before a start."""

    @property
    def pose(self) -> bool:
        """A pose command (fields `POSE_FIELDS`): it arrives as geometry_msgs/PoseStamped; a quaternion off unit
        length is rejected as a non-finite command is."""
        return self.fields == POSE_FIELDS

    def __post_init__(self):
        if self.fields and len(self.fields) != self.dim:
            raise ManifestError(f"command of type '{self.type}' has {len(self.fields)} fields for dim {self.dim}")
        if self.default is not None and len(self.default) != self.dim:
            raise ManifestError(f"command of type '{self.type}' has a default of {len(self.default)} values for dim {self.dim}")

    def to_json(self) -> dict[str, Any]:
        """The command spec as a JSON object."""
        return {"type": self.type, "dim": self.dim, "fields": list(self.fields),
                "default": list(self.default) if self.default is not None else None}

    @classmethod
    def from_json(cls, data: dict, label: str) -> CommandSpec:
        """The command spec of the JSON object at `label` (no type, fields or default when absent)."""
        data = data if isinstance(data, dict) else {}
        fields, default = data.get("fields") or [], data.get("default")
        if not isinstance(fields, list):
            raise ManifestError(f"field '{label}.fields' should be a list, got {type(fields).__name__}")
        if default is not None and not isinstance(default, list):
            raise ManifestError(f"field '{label}.default' should be a list or null, got {type(default).__name__}")
        return cls(str(data.get("type", "")), required(data, label, "dim", int),
                   tuple(map(str, fields)), numbers(default, f"{label}.default") if default is not None else None)
