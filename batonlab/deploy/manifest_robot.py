# SPDX-License-Identifier: BSD-3-Clause
"""Manifest sections about the robot rather than the policy: where sensor readings come from and
in which frame, the joints held while the policy drives others, and how the robot stops safely.

A sensor is one MuJoCo sensor (its type: "gyro", "framepos", …) or a pose ("pose": a `framepos` and
a `framequat` referenced to one frame, e.g. a perception node's object estimate); `mujoco_sensors`
names what gives the reading in simulation, so the sim robot publishes what training read.

Frames follow ROS: REP-103 axes (x forward, y left, z up; right-handed) for the base and the IMU,
and REP-145 for IMU data. The simulator's world is z-up, so an IMU orientation from MuJoCo's
`framequat` is the same quantity a REP-145 IMU reports in a gravity-aligned (ENU) frame; only its
yaw is arbitrary, and no term reads yaw.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from batonlab.deploy.manifest_json import ManifestError, bounds, finite_or_null, numbers, required, required_number
from batonlab.deploy.pose import POSE_DIM, QUAT_NORM_TOLERANCE

IMU_ORIENTATION, IMU_ANGULAR_VELOCITY, IMU_LINEAR_ACCELERATION, TOPIC = (
    "imu.orientation", "imu.angular_velocity", "imu.linear_acceleration", "topic")
SENSOR_SOURCES = (IMU_ORIENTATION, IMU_ANGULAR_VELOCITY, IMU_LINEAR_ACCELERATION, TOPIC)
"""Where the robot gets a sensor reading: a field of its sensor_msgs/Imu, or a topic of its own."""

SENSOR_CONVENTIONS = {
    IMU_ORIENTATION: "quaternion (w, x, y, z) of the IMU frame in a gravity-aligned frame with z up (REP-103 axes, "
                     "REP-145 orientation); yaw may be arbitrary",
    IMU_ANGULAR_VELOCITY: "angular velocity of the IMU frame, expressed in the IMU frame [rad/s] (REP-145)",
    IMU_LINEAR_ACCELERATION: "specific force in the IMU frame, gravity included: (0, 0, +9.81) m/s^2 at rest, "
                             "level (REP-145)",
    TOPIC: "a vector in `frame` (REP-103 axes), published on sensors/<name>",
}
"""What a reading from each source means; written next to each sensor in manifest.json."""

POSE = "pose"
"""`SensorSpec.type` of a pose: position [m] then orientation quaternion (w, x, y, z), from a `framepos`
and a `framequat` of one object referenced to one frame (`batonlab.deploy.pose`)."""

POSE_CONVENTION = (f"position [m] then orientation quaternion (w, x, y, z) of the sensed frame in `frame` (REP-103 axes), "
                   f"published on sensors/<name> as geometry_msgs/PoseStamped; a quaternion whose length is off 1 by more "
                   f"than {QUAT_NORM_TOLERANCE} is bad input (the robot stops); q and -q are one orientation, the policy "
                   f"sees the one with w >= 0")
"""What a pose reading means; written next to each pose sensor in manifest.json."""

_AT_REST = {IMU_ORIENTATION: (1.0, 0.0, 0.0, 0.0), IMU_LINEAR_ACCELERATION: (0.0, 0.0, 9.81)}


@dataclass(frozen=True)
class SensorSpec:
    """A sensor the policy reads, as the training scene defined it."""

    type: str
    """MuJoCo sensor type, e.g. "gyro", "accelerometer", "framequat", "framepos"; or `POSE`."""
    dim: int
    source: str
    """One of `SENSOR_SOURCES`."""
    frame: str = ""
    """The site (or body) the reading is taken in; the IMU frame for IMU sources."""
    body: str = ""
    """The body `frame` is fixed to (the base, for the IMU)."""
    pos: tuple[float, ...] = (0.0, 0.0, 0.0)
    """Position of `frame` in `body` [m]."""
    quat: tuple[float, ...] = (1.0, 0.0, 0.0, 0.0)
    """Orientation of `frame` in `body` (w, x, y, z): how the robot's IMU must be mounted, or rotated to."""
    mujoco_sensors: tuple[str, ...] = ()
    """The MuJoCo sensors whose readings, concatenated, are this sensor in simulation (a pose: its
    `framepos` then its `framequat`); empty (manifests before poses): the MuJoCo sensor of the same name."""

    def __post_init__(self):
        if self.source not in SENSOR_SOURCES:
            raise ManifestError(f"sensor source '{self.source}' is not one of {list(SENSOR_SOURCES)}")
        if self.dim < 1:
            raise ManifestError(f"sensor dim must be >= 1, got {self.dim}")
        if self.type == POSE:
            if self.dim != POSE_DIM or self.source != TOPIC:
                raise ManifestError(f"a pose sensor has dim {POSE_DIM} and source '{TOPIC}', got dim {self.dim} and "
                                    f"source '{self.source}'")
            if len(self.mujoco_sensors) != 2:
                raise ManifestError(f"a pose sensor names two MuJoCo sensors (its framepos, then its framequat), got "
                                    f"{list(self.mujoco_sensors)}")
        elif len(self.mujoco_sensors) > 1:
            raise ManifestError(f"a '{self.type}' sensor is one MuJoCo sensor, got {list(self.mujoco_sensors)}")

    @property
    def convention(self) -> str:
        """What a reading means (`POSE_CONVENTION`, else by source)."""
        return POSE_CONVENTION if self.type == POSE else SENSOR_CONVENTIONS[self.source]

    def at_rest(self) -> np.ndarray:
        """The reading of this sensor on a robot standing level and still (a dry run feeds it); a pose
        at rest is the identity (at the frame's origin, aligned with it)."""
        if self.type == POSE:
            return np.array((0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0))
        return np.array(_AT_REST.get(self.source, (0.0,) * self.dim), dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        """The sensor spec as a JSON object, with its `convention`."""
        return {"type": self.type, "dim": self.dim, "source": self.source, "frame": self.frame, "body": self.body,
                "pos": list(self.pos), "quat": list(self.quat), "mujoco_sensors": list(self.mujoco_sensors),
                "convention": self.convention}

    @classmethod
    def from_json(cls, data: dict, label: str) -> SensorSpec:
        """The sensor spec of a JSON object; `ManifestError` naming `label` if a field is missing or malformed."""
        if not isinstance(data, dict):
            raise ManifestError(f"field '{label}' should be an object, got {type(data).__name__}")
        mujoco_sensors = data.get("mujoco_sensors") or []
        if not isinstance(mujoco_sensors, list) or not all(isinstance(s, str) and s for s in mujoco_sensors):
            raise ManifestError(f"field '{label}.mujoco_sensors' should be a list of sensor names, got {mujoco_sensors!r}")
        try:
            return cls(type=required(data, label, "type", str), dim=required(data, label, "dim", int),
                       source=required(data, label, "source", str), frame=str(data.get("frame", "")),
                       body=str(data.get("body", "")), pos=numbers(list(data.get("pos") or (0.0, 0.0, 0.0)), f"{label}.pos"),
                       quat=numbers(list(data.get("quat") or (1.0, 0.0, 0.0, 0.0)), f"{label}.quat"),
                       mujoco_sensors=tuple(mujoco_sensors))
        except ManifestError as err:
            message = str(err)
            raise ManifestError(message if label in message else f"{label}: {message}") from None


@dataclass(frozen=True)
class HeldJoints:
    """Actuated joints the policy does not drive, held at `targets` by their position servos (a
    stowed arm on a base-only policy). The robot side commands them with the policy's joints."""

    names: tuple[str, ...] = ()
    targets: tuple[float, ...] = ()
    """Position targets [rad or m]."""
    pos_limits: tuple[tuple[float, float], ...] = ()
    torque_limits: tuple[float, ...] = ()
    kp: tuple[float, ...] = ()
    kd: tuple[float, ...] = ()

    def __post_init__(self):
        n = len(self.names)
        for key in ("targets", "pos_limits", "torque_limits", "kp", "kd"):
            if len(getattr(self, key)) != n:
                raise ManifestError(f"held_joints.{key} has {len(getattr(self, key))} values for {n} joints")

    def to_json(self) -> dict[str, Any]:
        """The held joints as a JSON object, unlimited bounds written as null."""
        return {"names": list(self.names), "targets": list(self.targets),
                "pos_limits": [[finite_or_null(lo), finite_or_null(hi)] for lo, hi in self.pos_limits],
                "torque_limits": [finite_or_null(v) for v in self.torque_limits], "kp": list(self.kp), "kd": list(self.kd)}

    @classmethod
    def from_json(cls, data: dict) -> HeldJoints:
        """The held joints of the manifest's `held_joints` object, null torque limits read as inf."""
        def get(key):
            return required(data, "held_joints", key, list)

        return cls(names=tuple(map(str, get("names"))), targets=numbers(get("targets"), "held_joints.targets"),
                   pos_limits=bounds(get("pos_limits"), "held_joints.pos_limits"),
                   torque_limits=numbers(get("torque_limits"), "held_joints.torque_limits", null=np.inf),
                   kp=numbers(get("kp"), "held_joints.kp"), kd=numbers(get("kd"), "held_joints.kd"))


@dataclass(frozen=True)
class StopSpec:
    """How this robot stops safely (`batonlab.deploy.safety`); a node may override it."""

    behavior: str = "hold_then_damp"
    pose: dict[str, float] = field(default_factory=dict)
    """"crouch": position targets the joints move to before they are damped [rad or m]."""
    time_s: float = 1.0
    """"crouch": time to reach `pose` [s]."""

    def to_json(self) -> dict[str, Any]:
        """The stop spec as a JSON object."""
        return {"behavior": self.behavior, "pose": dict(self.pose), "time_s": self.time_s}

    @classmethod
    def from_json(cls, data: dict) -> StopSpec:
        """The stop spec of the manifest's `stop` object (`time_s` 1 s when absent)."""
        pose = data.get("pose") or {}
        if not isinstance(pose, dict):
            raise ManifestError(f"field 'stop.pose' should be an object, got {type(pose).__name__}")
        return cls(behavior=required(data, "stop", "behavior", str),
                   pose=dict(zip(map(str, pose), numbers(list(pose.values()), "stop.pose"))),
                   time_s=required_number(data, "stop", "time_s") if "time_s" in data else 1.0)
