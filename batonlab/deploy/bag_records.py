# SPDX-License-Identifier: BSD-3-Clause
"""Records: what a `BagRecorder` call becomes on its way to the `BagWriter`, and how batches of them
cross the pipe to the writer process.

In the caller's thread a call becomes a plain tuple `(kind, *fields)` whose arrays are bytes (float64;
float32 for the observation and the raw action): cheap to build, copy and pickle, and the caller
may reuse its arrays at once. The writer reads it back as the named record of its kind (`decode`).
Each kind's fields are listed once, in its record class; its encoder, next to it, builds them in
that order. Frames on the pipe are `uint32 length (little-endian) + pickle`.
"""

from __future__ import annotations

import os
import pickle
import struct
from typing import NamedTuple

import numpy as np


class JointStateRecord(NamedTuple):
    """A joint state message: its joints' positions, velocities and efforts as float64 bytes."""

    stamp_ns: int
    header_ns: int | None
    names: tuple[str, ...] | None
    """None: the recorder's `joint_names`."""
    position: bytes
    velocity: bytes | None
    effort: bytes | None


def joint_state_record(stamp_ns, header_ns, names, position, velocity, effort) -> tuple:
    """Encode a joint state message as a `("joint_states", ...)` tuple whose arrays are float64 bytes."""
    return ("joint_states", int(stamp_ns), header_ns, None if names is None else tuple(names), f64_bytes(position),
            optional_f64_bytes(velocity), optional_f64_bytes(effort))


class ImuRecord(NamedTuple):
    """An IMU message: orientation (w, x, y, z), angular velocity [rad/s], linear acceleration [m/s²], as bytes."""

    stamp_ns: int
    header_ns: int | None
    frame_id: str
    orientation_wxyz: bytes
    angular_velocity: bytes
    linear_acceleration: bytes


def imu_record(stamp_ns, header_ns, frame_id, orientation_wxyz, angular_velocity, linear_acceleration) -> tuple:
    """Encode an IMU message as an `("imu", ...)` tuple whose arrays are float64 bytes."""
    return ("imu", int(stamp_ns), header_ns, str(frame_id), f64_bytes(orientation_wxyz), f64_bytes(angular_velocity),
            f64_bytes(linear_acceleration))


class OdomRecord(NamedTuple):
    """An odometry message: position [m], orientation (w, x, y, z), linear [m/s] and angular [rad/s] velocity."""

    stamp_ns: int
    header_ns: int | None
    frame_id: str
    child_frame_id: str
    position: bytes
    orientation_wxyz: bytes
    linear_velocity: bytes
    angular_velocity: bytes


def odom_record(stamp_ns, header_ns, frame_id, child_frame_id, position, orientation_wxyz, linear_velocity,
                angular_velocity) -> tuple:
    """Encode an odometry message as an `("odom", ...)` tuple whose arrays are float64 bytes."""
    return ("odom", int(stamp_ns), header_ns, str(frame_id), str(child_frame_id), f64_bytes(position),
            f64_bytes(orientation_wxyz), f64_bytes(linear_velocity), f64_bytes(angular_velocity))


class TwistRecord(NamedTuple):
    """A velocity command: linear [m/s] and angular [rad/s] velocity as float64 bytes."""

    stamp_ns: int
    linear: bytes
    angular: bytes


def twist_record(stamp_ns, linear, angular) -> tuple:
    """Encode a velocity command as a `("cmd_vel", ...)` tuple whose arrays are float64 bytes."""
    return ("cmd_vel", int(stamp_ns), f64_bytes(linear), f64_bytes(angular))


class JointCommandRecord(NamedTuple):
    """The joint targets sent to the servos, as float64 bytes."""

    stamp_ns: int
    values: bytes


def joint_command_record(stamp_ns, values) -> tuple:
    """Encode the joint targets as a `("joint_commands", ...)` tuple of float64 bytes."""
    return ("joint_commands", int(stamp_ns), f64_bytes(values))


class VectorRecord(NamedTuple):
    """A task command or a sensor reading on its own topic."""

    stamp_ns: int
    header_ns: int | None
    topic: str
    frame_id: str
    values: bytes


def vector_record(stamp_ns, header_ns, topic, frame_id, values) -> tuple:
    """Encode a vector reading on `topic` as a `("vector", ...)` tuple whose values are float64 bytes."""
    return ("vector", int(stamp_ns), header_ns, topic, str(frame_id), f64_bytes(values))


class PoseRecord(NamedTuple):
    """A pose sensor reading (e.g. a perception node's object estimate) on its own topic."""

    stamp_ns: int
    header_ns: int | None
    topic: str
    frame_id: str
    pose: bytes
    """(7,) position [m] then quaternion (w, x, y, z), as received."""


def pose_record(stamp_ns, header_ns, topic, frame_id, pose) -> tuple:
    """Encode a (7,) pose reading on `topic` as a `("pose", ...)` tuple whose pose is float64 bytes."""
    return ("pose", int(stamp_ns), header_ns, topic, str(frame_id), f64_bytes(pose))


class PolicyStepRecord(NamedTuple):
    """One policy step: its observation, raw and filtered actions, safety state and timing."""

    stamp_ns: int
    step: int
    episode: int
    observation: bytes
    """float32."""
    action_raw: bytes | None
    """float32."""
    action_filtered: bytes | None
    safety_state: str
    safety_reason: str
    input_ns: int
    compute_time_s: float


def policy_step_record(stamp_ns, step, episode, observation, action_raw, action_filtered, safety_state, safety_reason,
                       input_ns, compute_time_s) -> tuple:
    """Encode one policy step as a `("policy_step", ...)` tuple (observation, raw action float32; rest float64)."""
    return ("policy_step", int(stamp_ns), int(step), int(episode), f32_bytes(observation), optional_f32_bytes(action_raw),
            optional_f64_bytes(action_filtered), str(safety_state), str(safety_reason), int(input_ns), float(compute_time_s))


Record = (JointStateRecord | ImuRecord | OdomRecord | TwistRecord | JointCommandRecord | VectorRecord | PoseRecord
          | PolicyStepRecord)

RECORD_TYPES: dict[str, type] = {
    "joint_states": JointStateRecord, "imu": ImuRecord, "odom": OdomRecord, "cmd_vel": TwistRecord,
    "joint_commands": JointCommandRecord, "vector": VectorRecord, "pose": PoseRecord, "policy_step": PolicyStepRecord,
}
"""Kind (the first element of an encoded record) → record class."""


def decode(record: tuple) -> Record:
    """The named record of an encoded one."""
    cls = RECORD_TYPES.get(record[0])
    if cls is None:
        raise ValueError(f"unknown record kind {record[0]!r}")
    return cls(*record[1:])


# Arrays ↔ bytes.


def f64_bytes(values) -> bytes:
    """The values as float64 bytes."""
    if type(values) is np.ndarray and values.dtype == np.float64:  # the common case, 3x faster
        return values.tobytes()
    return np.asarray(values, dtype=np.float64).tobytes()


def f32_bytes(values) -> bytes:
    """The values as float32 bytes."""
    if type(values) is np.ndarray and values.dtype == np.float32:
        return values.tobytes()
    return np.asarray(values, dtype=np.float32).tobytes()


def optional_f64_bytes(values) -> bytes | None:
    """The values as float64 bytes, or None for None."""
    return None if values is None else f64_bytes(values)


def optional_f32_bytes(values) -> bytes | None:
    """The values as float32 bytes, or None for None."""
    return None if values is None else f32_bytes(values)


def f64_array(data: bytes | None) -> np.ndarray:
    """The float64 array of `f64_bytes` (empty for None)."""
    return np.zeros(0) if data is None else np.frombuffer(data, dtype=np.float64)


def f32_array(data: bytes | None) -> np.ndarray:
    """The float32 array of `f32_bytes` (empty for None)."""
    return np.zeros(0, dtype=np.float32) if data is None else np.frombuffer(data, dtype=np.float32)


# Frames on the pipe.

FRAME_HEADER = struct.Struct("<I")


def encode_frame(obj) -> bytes:
    """`obj` as one frame."""
    data = pickle.dumps(obj, protocol=5)
    return FRAME_HEADER.pack(len(data)) + data


def read_frame(fd: int):
    """The next frame's object from `fd`, or None at EOF."""
    head = _read_exact(fd, FRAME_HEADER.size)
    if head is None:
        return None
    body = _read_exact(fd, FRAME_HEADER.unpack(head)[0])
    return None if body is None else pickle.loads(body)


def _read_exact(fd: int, n: int) -> bytes | None:
    parts, left = [], n
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)
