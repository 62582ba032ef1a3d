# SPDX-License-Identifier: BSD-3-Clause
"""The manifest: the one typed definition of the contract between training and the robot.

`batonlab export` fills a `Manifest` from the env that trained the policy
(`batonlab.export.manifest.manifest_from_env`), attaches `Manifest.onnx_metadata()` to the ONNX
file and writes `Manifest.to_json()` as `manifest.json`; the robot reads it back with
`load_manifest`. Every value is stored once; the others are derived (`control_dt` from the physics
step and decimation, the action offsets and `default_pos` from `default_joint_pos`, `obs_dim` from
the observation terms, `action_dim` from the joints).

Version 2 is written; version-1 files (batonlab ≤ 0.1) still load (`batonlab.deploy.manifest_v1`).
A runtime that cannot read every field it needs, or whose ONNX file is not the one the manifest was
written for, refuses to start. Only the standard library and numpy are used here.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from batonlab.deploy.manifest_json import ManifestError, numbers, required
from batonlab.deploy.manifest_sections import (
    ACTION_TYPES,
    ActionTerm,
    ActuatedJoints,
    CommandSpec,
    ControlTiming,
    IKSpec,
    ObsTermLayout,
    POSITION_ACTION_TYPES,
    PolicyFile,
    ToolStepSpec,
)
from batonlab.deploy.manifest_robot import HeldJoints, SensorSpec, StopSpec
from batonlab.deploy.manifest_v1 import upgrade_v1
from batonlab.deploy.levels import command_layer_of, join_levels
from batonlab.deploy.pose import POSE_FIELDS

__all__ = [
    "ACTION_TYPES", "ActionTerm", "ActuatedJoints", "CommandSpec", "ControlTiming", "MANIFEST_FILE", "Manifest",
    "HeldJoints", "IKSpec", "ToolStepSpec", "ManifestError", "ObsTermLayout", "POSITION_ACTION_TYPES", "PolicyFile", "SensorSpec", "StopSpec", "SCHEMA_VERSION", "SUPPORTED_SCHEMA_VERSIONS", "load_manifest",
    "parse_manifest", "sha256_file",
]

SCHEMA_VERSION = 2
"""The version `to_json` writes."""

SUPPORTED_SCHEMA_VERSIONS = (1, 2)
"""Manifest schema versions this runtime reads."""

MANIFEST_FILE = "manifest.json"
"""Name of the manifest in an export folder."""

SIM_TO_SIM_FOLDER = "sim_to_sim"
"""`batonlab deploy --sim`'s node logs and results in an export folder; a new export of the folder drops them."""


@dataclass(frozen=True)
class Manifest:
    """Everything the robot needs to rebuild the policy input and interpret its output.

    Per-joint arrays (the properties) are in policy (action) order.
    """

    task: str
    policy: PolicyFile
    control: ControlTiming
    joints: ActuatedJoints
    default_joint_pos: dict[str, float]
    """Default position of every 1-DoF joint of the training scene, by name (action joints included) [rad or m]."""
    actions: tuple[ActionTerm, ...]
    obs_terms: tuple[ObsTermLayout, ...]
    obs_group: str = "policy"
    """Observation group of the training env that the policy reads."""
    commands: dict[str, CommandSpec] = field(default_factory=dict)
    """Command terms by name."""
    sensors: dict[str, SensorSpec] = field(default_factory=dict)
    """Sensors the observation reads, by name: type, frame and where the robot gets them (IMU or topic)."""
    held_joints: HeldJoints = field(default_factory=HeldJoints)
    """Actuated joints the policy does not drive, held by the robot side at their targets."""
    stop: StopSpec = field(default_factory=StopSpec)
    """The robot's safe stop."""
    batonlab_version: str = ""
    training_config: dict[str, Any] = field(default_factory=dict, repr=False)
    """How the policy was trained (checkpoint, env and agent configs); informative, never read by the robot."""
    base_dir: Path | None = field(default=None, compare=False, repr=False)
    """Folder of the manifest file (None for a manifest built in memory); `policy.file` is relative to it."""
    levels: tuple[Manifest, Manifest] | None = field(default=None, compare=False, repr=False)
    """A two-level policy's (upper, lower) manifests, this one being their joint-level join
    (`batonlab.deploy.levels.join_levels`); None for a single-level policy."""

    def __post_init__(self):
        action_joints = tuple(j for a in self.actions for j in a.joints)
        if action_joints != self.joints.names:
            raise ManifestError(f"the action terms' joints {list(action_joints)} are not joints.names {list(self.joints.names)}")
        for a in self.actions if self.levels is None else ():  # each level was checked on its own
            if a.ik is not None and (a.ik.command not in self.commands or self.commands[a.ik.command].dim < 3):
                raise ManifestError(f"action term '{a.name}' steers the tool to command '{a.ik.command}', which is not "
                                    f"a command of 3 or more values of this manifest (commands: {list(self.commands)})")
            if a.ik is not None and a.ik.orientation_weight > 0 and not self.commands[a.ik.command].pose:
                raise ManifestError(f"action term '{a.name}' turns the tool toward the orientation of command "
                                    f"'{a.ik.command}', which is not a pose (fields {list(POSE_FIELDS)})")
        missing = [j for j in self.joints.names if j not in self.default_joint_pos]
        if missing:
            raise ManifestError(f"default_joint_pos has no value for the action joints {missing}")
        both = sorted(set(self.held_joints.names) & set(self.joints.names))
        if both:
            raise ManifestError(f"joints {both} are both driven by the policy and held")
        if self.stop.behavior == "crouch" and command_layer_of(self) is None:  # a two-level policy stops as its lower level
            unknown = sorted(set(self.stop.pose) - set(self.joints.names) - set(self.held_joints.names))
            if unknown:
                raise ManifestError(f"stop.pose names joints {unknown} that are neither policy nor held joints")

    # Derived values.

    @property
    def onnx_path(self) -> Path | None:
        """The ONNX file next to the manifest (None for a manifest built in memory)."""
        return self.base_dir / self.policy.file if self.base_dir is not None else None

    @property
    def input_name(self) -> str:
        """Name of the ONNX policy's input."""
        return self.policy.input_name

    @property
    def output_name(self) -> str:
        """Name of the ONNX policy's output."""
        return self.policy.output_name

    @property
    def obs_dim(self) -> int:
        """Width of the policy input: the summed widths of the observation terms."""
        return sum(t.width for t in self.obs_terms)

    @property
    def action_dim(self) -> int:
        """Width of the policy output: the action terms' raw widths (one per joint, six per tool-step term)."""
        return sum(a.width for a in self.actions)

    @property
    def control_dt(self) -> float:
        """Control period [s]."""
        return self.control.dt

    @property
    def control_rate_hz(self) -> float:
        """Control rate [Hz]."""
        return self.control.rate_hz

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The policy's joints, in action order."""
        return self.joints.names

    @property
    def default_pos(self) -> np.ndarray:
        """(num_joints,) default pose of the action joints [rad or m]."""
        return np.array([self.default_joint_pos[j] for j in self.joints.names], dtype=np.float64)

    @property
    def pos_limits(self) -> np.ndarray:
        """(num_joints, 2) position limits, ±inf where unlimited [rad or m]."""
        return np.array(self.joints.pos_limits, dtype=np.float64).reshape(-1, 2)

    @property
    def ctrl_range(self) -> np.ndarray:
        """(num_joints, 2) actuator control range, ±inf where unlimited."""
        return np.array(self.joints.ctrl_range, dtype=np.float64).reshape(-1, 2)

    @property
    def torque_limits(self) -> np.ndarray:
        """(num_joints,) actuator force limits, inf where unlimited [N·m or N]."""
        return np.array(self.joints.torque_limits, dtype=np.float64)

    @property
    def kp(self) -> np.ndarray:
        """(num_joints,) position gains of the PD actuators used in training [N·m/rad]."""
        return np.array(self.joints.kp, dtype=np.float64)

    @property
    def kd(self) -> np.ndarray:
        """(num_joints,) damping gains of the PD actuators [N·m·s/rad]."""
        return np.array(self.joints.kd, dtype=np.float64)

    @property
    def action_scale(self) -> np.ndarray:
        """(action_dim,) scale of the raw action, per raw action."""
        return np.array([s for a in self.actions for s in a.scale], dtype=np.float64)

    @property
    def max_target_rate(self) -> np.ndarray:
        """(num_joints,) the rate training limited each joint's target to, inf where it did not [rad/s or m/s]."""
        return np.array([a.max_target_rate if a.max_target_rate is not None and a.type in POSITION_ACTION_TYPES else np.inf
                         for a in self.actions for _ in a.joints], dtype=np.float64)

    @property
    def action_offset(self) -> np.ndarray:
        """(num_joints,) target offset per joint: the default position for `use_default_offset` terms, else 0."""
        return np.array([self.default_joint_pos[j] if a.use_default_offset else 0.0 for a in self.actions for j in a.joints],
                        dtype=np.float64)

    def with_sha256(self, sha256: str) -> Manifest:
        """A copy that names the hash of its ONNX file."""
        return dataclasses.replace(self, policy=dataclasses.replace(self.policy, sha256=sha256))

    # JSON and ONNX metadata.

    def to_json(self) -> dict[str, Any]:
        """The `manifest.json` content (schema version `SCHEMA_VERSION`); of a two-level policy, the upper level's with
        the lower level's under `lower_manifest` (informative: a reader loads the lower level from its folder)."""
        if self.levels is not None:
            upper, lower = self.levels
            return {**upper.to_json(), "lower_manifest": lower.to_json()}
        return {
            "schema_version": SCHEMA_VERSION,
            "batonlab_version": self.batonlab_version,
            "task": self.task,
            "policy": self.policy.to_json(),
            "control": self.control.to_json(),
            "joints": self.joints.to_json(),
            "default_joint_pos": dict(self.default_joint_pos),
            "actions": [a.to_json() for a in self.actions],
            "observations": {"group": self.obs_group, "terms": [t.to_json() for t in self.obs_terms]},
            "commands": {name: c.to_json() for name, c in self.commands.items()},
            "sensors": {name: s.to_json() for name, s in self.sensors.items()},
            "held_joints": self.held_joints.to_json(),
            "stop": self.stop.to_json(),
            "training_config": self.training_config,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], base_dir: Path | None = None) -> Manifest:
        """Validate a version-2 manifest dictionary; errors name the field (`parse_manifest` reads every version)."""
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ManifestError(f"schema_version {data.get('schema_version')!r} is not {SCHEMA_VERSION}")
        observations = required(data, "", "observations", dict)
        default_joint_pos = required(data, "", "default_joint_pos", dict)
        commands = data.get("commands") or {}
        if not isinstance(commands, dict):
            raise ManifestError(f"field 'commands' should be an object, got {type(commands).__name__}")
        training_config = data.get("training_config") or {}
        sensors = data.get("sensors") or {}
        if not isinstance(sensors, dict):
            raise ManifestError(f"field 'sensors' should be an object, got {type(sensors).__name__}")
        held, stop = data.get("held_joints"), data.get("stop")
        for key, value in (("held_joints", held), ("stop", stop)):
            if value is not None and not isinstance(value, dict):
                raise ManifestError(f"field '{key}' should be an object, got {type(value).__name__}")
        return cls(
            task=str(data.get("task", "")),
            policy=PolicyFile.from_json(required(data, "", "policy", dict)),
            control=ControlTiming.from_json(required(data, "", "control", dict)),
            joints=ActuatedJoints.from_json(required(data, "", "joints", dict)),
            default_joint_pos=dict(zip(map(str, default_joint_pos), numbers(list(default_joint_pos.values()), "default_joint_pos"))),
            actions=tuple(ActionTerm.from_json(a, f"actions[{k}]") for k, a in enumerate(required(data, "", "actions", list))),
            obs_terms=tuple(ObsTermLayout.from_json(t, f"observations.terms[{k}]")
                            for k, t in enumerate(required(observations, "observations", "terms", list))),
            obs_group=str(observations.get("group", "policy")),
            commands={str(name): CommandSpec.from_json(c, f"commands.{name}") for name, c in commands.items()},
            sensors={str(name): SensorSpec.from_json(s, f"sensors.{name}") for name, s in sensors.items()},
            held_joints=HeldJoints.from_json(held) if held else HeldJoints(),
            stop=StopSpec.from_json(stop) if stop else StopSpec(),
            batonlab_version=str(data.get("batonlab_version", "")),
            training_config=training_config if isinstance(training_config, dict) else {},
            base_dir=base_dir,
        )

    def onnx_metadata(self) -> dict[str, str]:
        """The contract as ONNX `metadata_props` ("batonlab.<key>" → JSON), so the file alone says which
        joints, gains, rate and observation terms it expects."""
        values = {
            "schema_version": SCHEMA_VERSION,
            "task": self.task,
            "joint_names": list(self.joint_names),
            "default_joint_pos": self.default_pos.tolist(),
            "action_scale": self.action_scale.tolist(),
            "kp": list(self.joints.kp),
            "kd": list(self.joints.kd),
            "control_dt": self.control_dt,
            "held_joint_names": list(self.held_joints.names),
            "stop_behavior": self.stop.behavior,
            "observation_terms": [t.name for t in self.obs_terms],
            "observation_scale": [t.scale for t in self.obs_terms],
            "observation_clip": [list(t.clip) if t.clip is not None else None for t in self.obs_terms],
            "observation_history_length": [t.history_length for t in self.obs_terms],
        }
        return {f"batonlab.{key}": json.dumps(value) for key, value in values.items()}


# Reading a manifest file.


def parse_manifest(data: dict[str, Any], where: str = "manifest", base_dir: Path | None = None) -> Manifest:
    """Validate a manifest dictionary of any supported schema version into a `Manifest`.

    Raises:
        ManifestError: with a message naming `where` and the offending field.
    """
    try:
        if not isinstance(data, dict):
            raise ManifestError(f"expected a JSON object, got {type(data).__name__}")
        version = data.get("schema_version")
        if version not in SUPPORTED_SCHEMA_VERSIONS:
            raise ManifestError(f"schema_version {version!r} is not supported; this runtime reads {list(SUPPORTED_SCHEMA_VERSIONS)}")
        return Manifest.from_json(upgrade_v1(data) if version == 1 else data, base_dir)
    except ManifestError as err:
        raise ManifestError(f"{where}: {err}") from None


def load_manifest(path: str | Path, verify_hash: bool = True) -> Manifest:
    """Read `manifest.json` (or the export folder holding it) and check it against its ONNX file; a two-level policy's
    lower level too, from the folder its command layer names, and return the levels joined (`levels.join_levels`).

    Args:
        path: The manifest file or the folder written by `batonlab export`.
        verify_hash: Check the ONNX file's sha256 against the manifest (leave on outside tests).

    Raises:
        ManifestError: with a message naming the file and the offending field.
    """
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_FILE
    if not path.is_file():
        raise ManifestError(f"manifest not found: {path}")
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ManifestError(f"{path}: not valid JSON ({err})") from None
    manifest = parse_manifest(data, where=str(path), base_dir=path.parent)
    if not manifest.onnx_path.is_file():
        raise ManifestError(f"{path}: policy file {manifest.onnx_path} does not exist")
    if verify_hash:
        expected = manifest.policy.sha256
        if not expected:
            raise ManifestError(f"{path}: policy.sha256 is empty; re-export the policy with `batonlab export`")
        actual = sha256_file(manifest.onnx_path)
        if actual != expected:
            raise ManifestError(
                f"{path}: {manifest.onnx_path.name} has sha256 {actual[:12]}…, the manifest expects {expected[:12]}…; "
                "the ONNX file and the manifest come from different exports (copy both files together)"
            )
    layer = command_layer_of(manifest)
    if layer is None:
        return manifest
    try:
        return join_levels(manifest, load_manifest(path.parent / layer.lower, verify_hash))
    except ManifestError as err:
        raise ManifestError(f"{path} is the upper level of a two-level policy; its lower level "
                            f"({path.parent / layer.lower}): {err}") from None


def sha256_file(path: str | Path) -> str:
    """The hex SHA-256 digest of the file at `path`."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
