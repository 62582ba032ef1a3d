# SPDX-License-Identifier: BSD-3-Clause
"""The writing half of `batonlab.deploy.recording`: records → ROS messages → a rosbag2 MCAP bag.

`BagWriter` runs where the recorder puts it: in a separate process (`python -m
batonlab.deploy.bag_writer DATA_FD STATUS_FD`, the default, so that serialisation and disk
I/O never take the control process's GIL or CPU time) or in a thread of the caller (simulation).

A record is a tuple whose arrays are already bytes (cheap to copy, cheap to pickle):

    ("joint_states", log_ns, header_ns, names | None, position, velocity | None, effort | None)
    ("imu", log_ns, header_ns, frame_id, quaternion_wxyz, angular_velocity, linear_acceleration)
    ("cmd_vel", log_ns, None, linear, angular)
    ("joint_commands", log_ns, None, values)
    ("vector", log_ns, header_ns, topic, frame_id, values)
    ("policy_step", log_ns, None, step, episode, observation(f32), action_raw(f32) | None,
                    action_filtered | None, safety_state, safety_reason, input_ns, compute_time_s)

Worker protocol: frames of `uint32 length + pickle` on DATA_FD (the first frame is the
`BagWriter` keyword arguments, then lists of records, EOF ends the bag); JSON lines on STATUS_FD
(`ready`, `progress`, `error`, `closed`).
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import struct
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from batonlab.deploy.recording import MSG_TYPES, POLICY_STEP_TYPE, RecorderError, make_typestore, metadata_json


class BagWriter:
    """Creates the bag at `path` and writes records into it (one consumer, not thread-safe).

    Args:
        path: Bag folder to create (it must not exist).
        metadata: The complete metadata (format, joint names, topics …); see `recording`.
        joint_names: Default names of `joint_states` records.
        topics: Role → topic.
        chunk_bytes, chunk_interval_s: Close the current MCAP chunk (and push it to the disk) at this
            size or age.

    Raises:
        RecorderError: The bag cannot be created.
    """

    def __init__(self, path: str | Path, metadata: dict[str, Any], joint_names, topics: dict[str, str],
                 chunk_bytes: int = 1 << 20, chunk_interval_s: float = 1.0):
        try:
            from rosbags.rosbag2 import StoragePlugin, Writer
        except ImportError as err:  # pragma: no cover - rosbags is a dependency
            raise RecorderError(f"recording needs the rosbags package ({err})") from None
        self.path = Path(path)
        self.metadata = metadata
        self.joint_names = list(joint_names)
        self.topics = topics
        self.chunk_bytes, self.chunk_interval_s = int(chunk_bytes), float(chunk_interval_s)
        self.written = 0
        self._typestore = make_typestore()
        self._T = self._typestore.types
        try:
            self._writer = Writer(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
            for key in ("task", "robot", "seed", "manifest_sha256", "source"):
                if metadata.get(key) is not None:
                    self._writer.set_custom_data(f"batonlab.{key}", str(metadata[key]))
            self._writer.set_custom_data("batonlab", metadata_json(metadata))
            self._writer.open()
        except Exception as err:  # exists, permissions, read-only file system, metadata JSON cannot hold
            raise RecorderError(f"cannot create bag {self.path}: {err}") from None
        self._connections: dict[str, Any] = {}
        self._metadata_written = False
        self._last_flush = time.monotonic()

    def write(self, record: tuple) -> None:
        """Serialise and write one record; raises on write errors (the caller stops recording)."""
        kind, stamp_ns, header_ns = record[0], record[1], record[2]
        if not self._metadata_written:
            self._write(self.topics["metadata"], MSG_TYPES["metadata"], stamp_ns,
                        self._T["std_msgs/msg/String"](data=metadata_json(self.metadata)))
            self._metadata_written = True
        T = self._T
        header = T["std_msgs/msg/Header"](stamp=_time(T, stamp_ns if header_ns is None else header_ns), frame_id="")
        topic, msgtype = self.topics.get(kind), MSG_TYPES.get(kind)
        if kind == "joint_states":
            names, position, velocity, effort = record[3:]
            msg = T[msgtype](header=header, name=list(self.joint_names if names is None else names), position=_f64(position),
                             velocity=_f64(velocity), effort=_f64(effort))
        elif kind == "imu":
            frame_id, quat, ang_vel, lin_acc = record[3], _f64(record[4]), _f64(record[5]), _f64(record[6])
            header.frame_id = frame_id
            Vector3 = T["geometry_msgs/msg/Vector3"]
            msg = T[msgtype](
                header=header, orientation=T["geometry_msgs/msg/Quaternion"](w=quat[0], x=quat[1], y=quat[2], z=quat[3]),
                orientation_covariance=np.zeros(9), angular_velocity=Vector3(*ang_vel), angular_velocity_covariance=np.zeros(9),
                linear_acceleration=Vector3(*lin_acc), linear_acceleration_covariance=np.zeros(9))
        elif kind == "cmd_vel":
            Vector3 = T["geometry_msgs/msg/Vector3"]
            msg = T[msgtype](linear=Vector3(*_f64(record[3])), angular=Vector3(*_f64(record[4])))
        elif kind == "joint_commands":
            msg = _float_array(T, _f64(record[3]), "joints")
        elif kind == "vector":
            topic, frame_id, values = record[3], record[4], _f64(record[5])
            if values.size == 3:
                header.frame_id = frame_id
                msgtype = "geometry_msgs/msg/PointStamped"
                msg = T[msgtype](header=header, point=T["geometry_msgs/msg/Point"](*values))
            else:
                msgtype = "std_msgs/msg/Float64MultiArray"
                msg = _float_array(T, values, topic.rsplit("/", 1)[-1])
        elif kind == "policy_step":
            step, episode, obs, raw, filtered, state, reason, input_ns, compute_time = record[3:]
            msg = T[POLICY_STEP_TYPE](
                header=header, step=step, episode=episode, observation=_f32(obs), action_raw=_f32(raw),
                action_filtered=_f64(filtered), safety_state=state, safety_reason=reason, input_stamp=_time(T, input_ns),
                compute_time=compute_time)
        else:
            raise ValueError(f"unknown record kind {kind!r}")
        self._write(topic, msgtype, stamp_ns, msg)
        self._maybe_flush()

    def close(self, recorder_stats: dict | None = None) -> None:
        """Write the MCAP summary and metadata.yaml."""
        if not self._metadata_written:
            self._write(self.topics["metadata"], MSG_TYPES["metadata"], 0,
                        self._T["std_msgs/msg/String"](data=metadata_json(self.metadata)))
        self._writer.set_custom_data("batonlab.recorder", json.dumps({"written": self.written, **(recorder_stats or {})}))
        self._writer.close()

    def abort(self) -> None:
        """Close the file as it is (no summary): readers recover the complete chunks."""
        try:
            self._writer.abort()
        except Exception:  # noqa: BLE001 - the file is already broken
            pass

    # Private methods.

    def _write(self, topic: str, msgtype: str, stamp_ns: int, msg) -> None:
        conn = self._connections.get(topic)
        if conn is None:
            conn = self._connections[topic] = self._writer.add_connection(topic, msgtype, typestore=self._typestore)
        self._writer.write(conn, stamp_ns, self._typestore.serialize_cdr(msg, msgtype))
        self.written += 1

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


def _f64(data) -> np.ndarray:
    return np.zeros(0) if data is None else np.frombuffer(data, dtype=np.float64)


def _f32(data) -> np.ndarray:
    return np.zeros(0, dtype=np.float32) if data is None else np.frombuffer(data, dtype=np.float32)


def _time(T, stamp_ns: int):
    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    return T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


def _float_array(T, values: np.ndarray, label: str):
    layout = T["std_msgs/msg/MultiArrayLayout"](
        dim=[T["std_msgs/msg/MultiArrayDimension"](label=label, size=values.size, stride=values.size)], data_offset=0)
    return T["std_msgs/msg/Float64MultiArray"](layout=layout, data=values)


# The worker process.

FRAME = struct.Struct("<I")


def read_frame(fd: int):
    """The next pickled frame from `fd`, or None at EOF."""
    head = _read_exact(fd, FRAME.size)
    if head is None:
        return None
    body = _read_exact(fd, FRAME.unpack(head)[0])
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


def worker_main(data_fd: int, status_fd: int) -> int:
    """Write the bag described by the first frame from the records that follow, until EOF.

    The worker ignores SIGINT (a Ctrl-C in the terminal reaches the whole process group): the bag is
    closed when the recorder closes the pipe, or when its process dies, whichever comes first.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:  # serialising is background work: leave the CPU to the control loop when both want it
        os.nice(10)
    except OSError:
        pass
    status = os.fdopen(status_fd, "w", buffering=1)

    def report(event: str, **values) -> None:
        try:
            status.write(json.dumps({"event": event, **values}) + "\n")
        except OSError:  # the recorder is gone; keep writing the bag
            pass

    config = read_frame(data_fd)
    if config is None:
        return 1
    try:
        writer = BagWriter(**config)
    except RecorderError as err:
        report("error", error=str(err))
        return 1
    report("ready")
    error, last_report, dropped = None, time.monotonic(), 0
    while (batch := read_frame(data_fd)) is not None:
        if error is not None:
            dropped += len(batch)
            continue  # keep draining, so the recorder never blocks on a full pipe
        try:
            for record in batch:
                writer.write(record)
        except Exception as err:  # disk full, file system gone: stop writing, keep the process alive
            error = f"{type(err).__name__}: {err}"
            writer.abort()
            report("error", error=error, written=writer.written)
            continue
        if time.monotonic() - last_report > 0.5:
            last_report = time.monotonic()
            report("progress", written=writer.written)
    if error is None:
        try:
            writer.close()
        except Exception as err:  # noqa: BLE001 - reported to the recorder
            error = f"closing the bag failed: {type(err).__name__}: {err}"
            writer.abort()
    report("closed", written=writer.written, error=error)
    return 0


if __name__ == "__main__":
    sys.exit(worker_main(int(sys.argv[1]), int(sys.argv[2])))
