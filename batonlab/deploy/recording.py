# SPDX-License-Identifier: BSD-3-Clause
"""Recording a policy's inputs and outputs to rosbag2 (MCAP storage) with `rosbags`.

The robot side (`policy_node`) and simulation (`batonlab play record=DIR`) write the same bag
layout, so `batonlab replay` and `batonlab bag` read either:

    /joint_states           sensor_msgs/msg/JointState         measured joint positions, velocities, efforts
    /imu                    sensor_msgs/msg/Imu                base orientation (wxyz), angular velocity, acceleration
    /cmd_vel                geometry_msgs/msg/Twist            velocity command, when the task has one
    /commands/<name>        geometry_msgs/msg/PointStamped     task commands (3-vectors), else Float64MultiArray
    /sensors/<name>         geometry_msgs/msg/PointStamped     sensors the policy reads (3-vectors), else Float64MultiArray
    /joint_commands         std_msgs/msg/Float64MultiArray     joint targets sent to the servos (PD targets)
    /batonlab/policy_step   batonlab_msgs/msg/PolicyStep       observation, raw and filtered action, safety state
    /batonlab/metadata      std_msgs/msg/String                JSON metadata (first message of the bag)

The PolicyStep definition (`POLICY_STEP_MSG`) is stored in the bag like every other type, so any
rosbag2 reader deserialises it without batonlab installed.

Metadata (task, robot, seed, manifest sha256, joint order, initial state …) is written twice: in
`metadata.yaml` under `custom_data` (`batonlab.task`, …, and the whole JSON under `batonlab`),
which rosbag2 writes when the bag is closed, and as the JSON first message of `/batonlab/metadata`,
which survives a crash or a truncated file.

The control loop never waits for the disk: `BagRecorder` methods copy their arguments into a
bounded queue and return; a background thread serialises and writes. A write error (disk full,
file system gone) stops the recording, not the caller: `ok` turns False and `error` says why.
This module imports numpy, rosbags and the standard library only.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

POLICY_STEP_TYPE = "batonlab_msgs/msg/PolicyStep"
"""ROS type name of the batonlab per-step message."""

POLICY_STEP_MSG = """\
# One control step of a batonlab policy (written by batonlab.deploy.recording).
std_msgs/Header header              # stamp: time of the control step
uint64 step                         # policy step index since the start of the recording
uint32 episode                      # episode index (simulation); 0 on a robot
float32[] observation               # policy input, in the manifest's observation layout
float32[] action_raw                # policy output, before post-processing
float64[] action_filtered           # joint targets after post-processing and the safety filter (joint order)
string safety_state                 # passive | ramp | run | damp; "sim" in simulation
string safety_reason                # why the safety filter is in that state
builtin_interfaces/Time input_stamp # header stamp of the joint states the step used (zero: same as header)
float64 compute_time                # wall time of the control step [s]; 0 when not measured
"""
"""`batonlab_msgs/msg/PolicyStep` as a .msg definition."""

BAG_FORMAT = "batonlab-bag/1"
"""Value of `format` in the metadata; bumped when the layout changes."""

DEFAULT_TOPICS = {
    "joint_states": "/joint_states",
    "imu": "/imu",
    "cmd_vel": "/cmd_vel",
    "joint_commands": "/joint_commands",
    "policy_step": "/batonlab/policy_step",
    "metadata": "/batonlab/metadata",
}
"""Role → topic. The roles used by a bag are stored in its metadata under `topics`."""

COMMAND_TOPIC_PREFIX = "/commands/"
"""Task commands are recorded on `/commands/<name>`."""

SENSOR_TOPIC_PREFIX = "/sensors/"
"""Sensors the policy reads by name are recorded on `/sensors/<name>`."""

MSG_TYPES = {
    "joint_states": "sensor_msgs/msg/JointState",
    "imu": "sensor_msgs/msg/Imu",
    "cmd_vel": "geometry_msgs/msg/Twist",
    "joint_commands": "std_msgs/msg/Float64MultiArray",
    "policy_step": POLICY_STEP_TYPE,
    "metadata": "std_msgs/msg/String",
}

log = logging.getLogger("batonlab.deploy.recording")


class RecorderError(RuntimeError):
    """The bag could not be created (folder exists, permissions, rosbags missing)."""


def make_typestore():
    """A rosbags typestore with the ROS 2 Jazzy messages and `batonlab_msgs/msg/PolicyStep`."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    store.register(get_types_from_msg(POLICY_STEP_MSG, POLICY_STEP_TYPE))
    return store


def _json_default(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def metadata_json(metadata: dict[str, Any]) -> str:
    """The metadata as JSON (numpy arrays become lists)."""
    return json.dumps(metadata, default=_json_default, sort_keys=True)


_STOP = object()


class BagRecorder:
    """A rosbag2 (MCAP) writer that never blocks its caller.

    Every `joint_state` / `policy_step` / … call copies its arrays into a queue (a few µs) and
    returns; a daemon thread builds the messages, serialises them (CDR) and writes them. Chunks are
    flushed to disk every `chunk_interval_s` or `chunk_bytes`, so a crash loses at most that much.

    Args:
        path: Bag folder to create; it must not exist.
        metadata: JSON-able facts about the recording (task, robot, seed, manifest_sha256, …).
        joint_names: Names of the joints in `joint_state` calls (policy / manifest order).
        command_joint_names: Order of the `joint_commands` vector (default: `joint_names`).
        topics: Role → topic overrides of `DEFAULT_TOPICS`.
        queue_size: Pending calls beyond this are dropped (and counted in `dropped`), not waited for.
        chunk_bytes: Flush the current MCAP chunk when it holds this many bytes.
        chunk_interval_s: … or when it is this old (wall time) [s].

    Raises:
        RecorderError: The folder exists or cannot be created.
    """

    def __init__(
        self,
        path: str | Path,
        metadata: dict[str, Any] | None = None,
        joint_names: Sequence[str] = (),
        command_joint_names: Sequence[str] | None = None,
        topics: dict[str, str] | None = None,
        queue_size: int = 10000,
        chunk_bytes: int = 1 << 20,
        chunk_interval_s: float = 1.0,
    ):
        try:
            from rosbags.rosbag2 import StoragePlugin, Writer
        except ImportError as err:  # pragma: no cover - rosbags is a dependency
            raise RecorderError(f"recording needs the rosbags package ({err})") from None
        self.path = Path(path)
        self.joint_names = tuple(joint_names)
        self.command_joint_names = tuple(command_joint_names if command_joint_names is not None else joint_names)
        self.topics = {**DEFAULT_TOPICS, **(topics or {})}
        self.metadata = {
            "format": BAG_FORMAT,
            **(metadata or {}),
            "joint_names": list(self.joint_names),
            "command_joint_names": list(self.command_joint_names),
            "topics": dict(self.topics),
        }
        self.queue_size = int(queue_size)
        self.chunk_bytes = int(chunk_bytes)
        self.chunk_interval_s = float(chunk_interval_s)
        # Status, written by the writer thread and read by anyone.
        self.error: str | None = None
        """Why recording stopped (None while it works)."""
        self.dropped = 0
        """Calls dropped because the queue was full or recording had failed."""
        self.written = 0
        """Messages written to the bag."""
        self._failed = False
        self._closed = False
        self._queue: queue.SimpleQueue = queue.SimpleQueue()

        self._typestore = make_typestore()
        try:
            self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
            for key in ("task", "robot", "seed", "manifest_sha256", "source"):
                if self.metadata.get(key) is not None:
                    self._writer.set_custom_data(f"batonlab.{key}", str(self.metadata[key]))
            self._writer.set_custom_data("batonlab", metadata_json(self.metadata))
            self._writer.open()
        except Exception as err:  # exists, permissions, read-only file system, metadata JSON cannot hold
            raise RecorderError(f"cannot create bag {self.path}: {err}") from None
        self._connections: dict[str, Any] = {}
        self._metadata_written = False
        self._last_flush = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"bag-writer:{self.path.name}", daemon=True)
        self._thread.start()

    # Status.

    @property
    def ok(self) -> bool:
        """True while messages reach the disk."""
        return not self._failed

    @property
    def pending(self) -> int:
        """Calls queued but not written yet."""
        return self._queue.qsize()

    def status(self) -> dict[str, Any]:
        """Values for diagnostics."""
        return {"recording": str(self.path), "recording_ok": self.ok, "recording_error": self.error,
                "recording_written": self.written, "recording_dropped": self.dropped, "recording_pending": self.pending}

    # Recording (called from the control loop; copies and enqueues only).

    def joint_state(self, stamp_ns: int, position, velocity=None, effort=None, names: Sequence[str] | None = None,
                    header_ns: int | None = None) -> None:
        """Joint positions [rad or m], velocities and efforts [N·m or N] of `names` (default `joint_names`)."""
        self._put(("joint_states", int(stamp_ns), header_ns, names, np.array(position, dtype=np.float64),
                   _opt(velocity), _opt(effort)))

    def imu(self, stamp_ns: int, orientation_wxyz, angular_velocity, linear_acceleration, frame_id: str = "",
            header_ns: int | None = None) -> None:
        """Base orientation (quaternion wxyz), angular velocity [rad/s] and proper acceleration [m/s²]."""
        self._put(("imu", int(stamp_ns), header_ns, frame_id, np.array(orientation_wxyz, dtype=np.float64),
                   np.array(angular_velocity, dtype=np.float64), np.array(linear_acceleration, dtype=np.float64)))

    def twist(self, stamp_ns: int, linear, angular) -> None:
        """A velocity command [m/s, rad/s]."""
        self._put(("cmd_vel", int(stamp_ns), None, np.array(linear, dtype=np.float64), np.array(angular, dtype=np.float64)))

    def joint_command(self, stamp_ns: int, values) -> None:
        """The joint targets sent to the servos, in `command_joint_names` order."""
        self._put(("joint_commands", int(stamp_ns), None, np.array(values, dtype=np.float64)))

    def task_command(self, name: str, stamp_ns: int, values, frame_id: str = "", header_ns: int | None = None) -> None:
        """A task command (e.g. a reach target) on `/commands/<name>`."""
        self._put(("vector", int(stamp_ns), header_ns, COMMAND_TOPIC_PREFIX + name, frame_id,
                   np.array(values, dtype=np.float64).reshape(-1)))

    def sensor(self, name: str, stamp_ns: int, values, frame_id: str = "", header_ns: int | None = None) -> None:
        """A sensor the policy reads by name (e.g. the tool point `ee_pos_b`) on `/sensors/<name>`."""
        self._put(("vector", int(stamp_ns), header_ns, SENSOR_TOPIC_PREFIX + name, frame_id,
                   np.array(values, dtype=np.float64).reshape(-1)))

    def policy_step(self, stamp_ns: int, step: int, observation, action_raw, action_filtered=None, safety_state: str = "",
                    safety_reason: str = "", episode: int = 0, input_ns: int = 0, compute_time_s: float = 0.0) -> None:
        """One control step: the observation the policy saw, its raw output and the filtered targets."""
        self._put(("policy_step", int(stamp_ns), None, int(step), int(episode), np.array(observation, dtype=np.float32),
                   _opt(action_raw, np.float32), _opt(action_filtered), str(safety_state), str(safety_reason),
                   int(input_ns), float(compute_time_s)))

    def close(self, timeout_s: float = 30.0) -> dict[str, Any]:
        """Write what is queued, the index and metadata.yaml; returns `status()`.

        Never raises on write errors: they end up in `error`.
        """
        if not self._closed:
            self._closed = True
            self._queue.put(_STOP)
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                self._fail(f"the writer did not finish within {timeout_s:.0f} s")
        return self.status()

    def __enter__(self) -> BagRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # Private methods.

    def _put(self, item: tuple) -> None:
        if self._failed or self._closed or self._queue.qsize() >= self.queue_size:
            self.dropped += 1
            return
        self._queue.put(item)

    def _fail(self, reason: str) -> None:
        if not self._failed:
            self._failed = True
            self.error = reason
            log.error("recording to %s stopped: %s (%d messages written); the caller keeps running",
                      self.path, reason, self.written)

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                break
            if self._failed:
                self.dropped += 1
                continue
            try:
                self._write_item(item)
                self._maybe_flush()
            except Exception as err:  # disk full, file system errors, bad values: stop recording, not the caller
                self._fail(f"{type(err).__name__}: {err}")
                self._abort()
                continue
            if not self._queue.empty():
                # Hand the GIL to the control loop between messages, so a backlog never delays it by more than one.
                time.sleep(20e-6)
        self._finish()

    def _finish(self) -> None:
        if self._failed:
            self._abort()
            return
        try:
            if not self._metadata_written:
                self._write_metadata(0)
            self._writer.set_custom_data("batonlab.recorder", json.dumps({"written": self.written, "dropped": self.dropped}))
            self._writer.close()
        except Exception as err:
            self._fail(f"closing the bag failed: {type(err).__name__}: {err}")
            self._abort()

    def _abort(self) -> None:
        try:
            self._writer.abort()
        except Exception:  # pragma: no cover - the file is already broken
            pass

    def _connection(self, topic: str, msgtype: str):
        conn = self._connections.get(topic)
        if conn is None:
            conn = self._writer.add_connection(topic, msgtype, typestore=self._typestore)
            self._connections[topic] = conn
        return conn

    def _write(self, topic: str, msgtype: str, stamp_ns: int, msg) -> None:
        data = self._typestore.serialize_cdr(msg, msgtype)
        self._writer.write(self._connection(topic, msgtype), stamp_ns, data)
        self.written += 1

    def _write_metadata(self, stamp_ns: int) -> None:
        String = self._typestore.types["std_msgs/msg/String"]
        self._write(self.topics["metadata"], MSG_TYPES["metadata"], stamp_ns, String(data=metadata_json(self.metadata)))
        self._metadata_written = True

    def _write_item(self, item: tuple) -> None:
        kind, stamp_ns, header_ns = item[0], item[1], item[2]
        if not self._metadata_written:
            self._write_metadata(stamp_ns)
        T = self._typestore.types
        header = T["std_msgs/msg/Header"](stamp=_time(T, stamp_ns if header_ns is None else header_ns), frame_id="")
        if kind == "joint_states":
            names, position, velocity, effort = item[3:]
            names = list(self.joint_names if names is None else names)
            msg = T[MSG_TYPES[kind]](header=header, name=names, position=position,
                                     velocity=_or_empty(velocity), effort=_or_empty(effort))
        elif kind == "imu":
            frame_id, quat, ang_vel, lin_acc = item[3:]
            header.frame_id = frame_id
            Vector3, Quaternion = T["geometry_msgs/msg/Vector3"], T["geometry_msgs/msg/Quaternion"]
            msg = T[MSG_TYPES[kind]](
                header=header, orientation=Quaternion(w=quat[0], x=quat[1], y=quat[2], z=quat[3]),
                orientation_covariance=np.zeros(9), angular_velocity=Vector3(*ang_vel),
                angular_velocity_covariance=np.zeros(9), linear_acceleration=Vector3(*lin_acc),
                linear_acceleration_covariance=np.zeros(9))
        elif kind == "cmd_vel":
            linear, angular = item[3:]
            Vector3 = T["geometry_msgs/msg/Vector3"]
            msg = T[MSG_TYPES[kind]](linear=Vector3(*linear), angular=Vector3(*angular))
        elif kind == "joint_commands":
            msg = _float_array(T, item[3], "joints")
        elif kind == "vector":
            topic, frame_id, values = item[3:]
            if values.size == 3:
                header.frame_id = frame_id
                msgtype = "geometry_msgs/msg/PointStamped"
                msg = T[msgtype](header=header, point=T["geometry_msgs/msg/Point"](*values))
            else:
                msgtype = "std_msgs/msg/Float64MultiArray"
                msg = _float_array(T, values, topic.rsplit("/", 1)[-1])
            self._write(topic, msgtype, stamp_ns, msg)
            return
        elif kind == "policy_step":
            step, episode, obs, raw, filtered, state, reason, input_ns, compute_time = item[3:]
            msg = T[POLICY_STEP_TYPE](
                header=header, step=step, episode=episode, observation=obs,
                action_raw=_or_empty(raw, np.float32), action_filtered=_or_empty(filtered),
                safety_state=state, safety_reason=reason, input_stamp=_time(T, input_ns), compute_time=compute_time)
        else:  # pragma: no cover - every kind above is produced by this class
            raise ValueError(f"unknown record kind {kind!r}")
        self._write(self.topics[kind], MSG_TYPES[kind], stamp_ns, msg)

    def _maybe_flush(self) -> None:
        """Close the current MCAP chunk when it is big or old enough, and push it to the disk.

        rosbags' MCAP writer keeps a chunk in memory until it reaches 1 MiB; a robot log at a few
        hundred messages per second would lose minutes on a crash. `close_chunk` is the writer's
        own method for that (it is what `close()` calls).
        """
        storage = self._writer.storage
        chunk = getattr(storage, "chunk", None)
        if chunk is None or not chunk.msgs:
            return
        now = time.monotonic()
        if chunk.bio.tell() >= self.chunk_bytes or now - self._last_flush >= self.chunk_interval_s:
            storage.close_chunk()
            storage.bio.flush()
            self._last_flush = now


def _opt(values, dtype=np.float64):
    return None if values is None else np.array(values, dtype=dtype)


def _or_empty(values, dtype=np.float64) -> np.ndarray:
    return np.zeros(0, dtype=dtype) if values is None else values


def _time(T, stamp_ns: int):
    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    return T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


def _float_array(T, values: np.ndarray, label: str):
    layout = T["std_msgs/msg/MultiArrayLayout"](
        dim=[T["std_msgs/msg/MultiArrayDimension"](label=label, size=values.size, stride=values.size)], data_offset=0)
    return T["std_msgs/msg/Float64MultiArray"](layout=layout, data=values)
