# SPDX-License-Identifier: BSD-3-Clause
"""Manifest sections about the robot rather than the policy: where sensor readings come from and
in which frame, the joints held while the policy drives others, and how the robot stops safely.

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

_AT_REST = {IMU_ORIENTATION: (1.0, 0.0, 0.0, 0.0), IMU_LINEAR_ACCELERATION: (0.0, 0.0, 9.81)}


@dataclass(frozen=True)
class SensorSpec:
    """A sensor the policy reads, as the training scene defined it."""

    type: str
    """MuJoCo sensor type, e.g. "gyro", "accelerometer", "framequat", "framepos"."""
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

    def __post_init__(self):
        if self.source not in SENSOR_SOURCES:
            raise ManifestError(f"sensor source '{self.source}' is not one of {list(SENSOR_SOURCES)}")
        if self.dim < 1:
            raise ManifestError(f"sensor dim must be >= 1, got {self.dim}")

    def at_rest(self) -> np.ndarray:
        """The reading of this sensor on a robot standing level and still (a dry run feeds it)."""
        return np.array(_AT_REST.get(self.source, (0.0,) * self.dim), dtype=np.float64)

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "dim": self.dim, "source": self.source, "frame": self.frame, "body": self.body,
                "pos": list(self.pos), "quat": list(self.quat), "convention": SENSOR_CONVENTIONS[self.source]}

    @classmethod
    def from_json(cls, data: dict, label: str) -> SensorSpec:
        return cls(type=required(data, label, "type", str), dim=required(data, label, "dim", int),
                   source=required(data, label, "source", str), frame=str(data.get("frame", "")),
                   body=str(data.get("body", "")), pos=numbers(list(data.get("pos") or (0.0, 0.0, 0.0)), f"{label}.pos"),
                   quat=numbers(list(data.get("quat") or (1.0, 0.0, 0.0, 0.0)), f"{label}.quat"))


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
        return {"names": list(self.names), "targets": list(self.targets),
                "pos_limits": [[finite_or_null(lo), finite_or_null(hi)] for lo, hi in self.pos_limits],
                "torque_limits": [finite_or_null(v) for v in self.torque_limits], "kp": list(self.kp), "kd": list(self.kd)}

    @classmethod
    def from_json(cls, data: dict) -> HeldJoints:
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
        return {"behavior": self.behavior, "pose": dict(self.pose), "time_s": self.time_s}

    @classmethod
    def from_json(cls, data: dict) -> StopSpec:
        pose = data.get("pose") or {}
        if not isinstance(pose, dict):
            raise ManifestError(f"field 'stop.pose' should be an object, got {type(pose).__name__}")
        return cls(behavior=required(data, "stop", "behavior", str),
                   pose=dict(zip(map(str, pose), numbers(list(pose.values()), "stop.pose"))),
                   time_s=required_number(data, "stop", "time_s") if "time_s" in data else 1.0)
