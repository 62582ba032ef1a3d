# SPDX-License-Identifier: BSD-3-Clause
"""Writing a bag: records (`batonlab.deploy.bag_records`) → ROS messages → a rosbag2 MCAP file in the
batonlab layout (`batonlab.deploy.bag_format`).

`BagWriter` runs where the recorder (`batonlab.deploy.recording`) puts it: in a separate process
(`python -m batonlab.deploy.bag_writer DATA_FD STATUS_FD`, the default, so that serialisation and
disk I/O never take the control process's GIL or CPU time) or in a thread of the caller (simulation).

Worker protocol: frames (`bag_records.read_frame`) on DATA_FD, the first holding the `BagWriter`
keyword arguments, then lists of encoded records; EOF ends the bag. JSON lines on STATUS_FD: `ready`,
`progress`, `error`, `closed`.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from batonlab.deploy.bag_format import MSG_TYPES, METADATA_KEYS, POSE_STAMPED, make_typestore, metadata_json
from batonlab.deploy.bag_records import (
    ImuRecord,
    JointCommandRecord,
    JointStateRecord,
    OdomRecord,
    PolicyStepRecord,
    PoseRecord,
    Record,
    TwistRecord,
    VectorRecord,
    decode,
    f32_array,
    f64_array,
    read_frame,
)


class RecorderError(RuntimeError):
    """The bag could not be created (folder exists, permissions, rosbags missing)."""


class BagWriter:
    """Creates the bag at `path` and writes records into it (one consumer, not thread-safe).

    Args:
        path: Bag folder to create (it must not exist).
        metadata: The complete metadata (`bag_format.bag_metadata`).
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
            for key in METADATA_KEYS:
                if metadata.get(key) is not None:
                    self._writer.set_custom_data(f"batonlab.{key}", str(metadata[key]))
            self._writer.set_custom_data("batonlab", metadata_json(metadata))
            self._writer.open()
        except Exception as err:  # exists, permissions, read-only file system, metadata JSON cannot hold
            raise RecorderError(f"cannot create bag {self.path}: {err}") from None
        self._connections: dict[str, Any] = {}
        self._metadata_written = False
        self._last_flush = time.monotonic()

    def write(self, encoded: tuple) -> None:
        """Serialise and write one encoded record (`bag_records`); raises on write errors (the caller stops recording)."""
        record = decode(encoded)
        if not self._metadata_written:
            self._write_metadata(record.stamp_ns)
        topic, msgtype, msg = self._message(record)
        self._write(topic, msgtype, record.stamp_ns, msg)
        self._maybe_flush()

    def close(self, recorder_stats: dict | None = None) -> None:
        """Write the MCAP summary and metadata.yaml."""
        if not self._metadata_written:
            self._write_metadata(0)
        self._writer.set_custom_data("batonlab.recorder", json.dumps({"written": self.written, **(recorder_stats or {})}))
        self._writer.close()

    def abort(self) -> None:
        """Close the file as it is (no summary): readers recover the complete chunks."""
        try:
            self._writer.abort()
        except Exception:  # noqa: BLE001 - the file is already broken
            pass

    # Private methods.

    def _write_metadata(self, stamp_ns: int) -> None:
        self._write(self.topics["metadata"], MSG_TYPES["metadata"], stamp_ns,
                    self._T["std_msgs/msg/String"](data=metadata_json(self.metadata)))
        self._metadata_written = True

    def _message(self, record: Record) -> tuple[str, str, Any]:
        """(topic, type, message) of a record."""
        T = self._T
        header_ns = getattr(record, "header_ns", None)
        header = T["std_msgs/msg/Header"](stamp=_time(T, record.stamp_ns if header_ns is None else header_ns), frame_id="")
        Vector3 = T["geometry_msgs/msg/Vector3"]
        if isinstance(record, JointStateRecord):
            names = self.joint_names if record.names is None else record.names
            return self.topics["joint_states"], MSG_TYPES["joint_states"], T[MSG_TYPES["joint_states"]](
                header=header, name=list(names), position=f64_array(record.position), velocity=f64_array(record.velocity),
                effort=f64_array(record.effort))
        if isinstance(record, ImuRecord):
            quat = f64_array(record.orientation_wxyz)
            header.frame_id = record.frame_id
            return self.topics["imu"], MSG_TYPES["imu"], T[MSG_TYPES["imu"]](
                header=header, orientation=T["geometry_msgs/msg/Quaternion"](w=quat[0], x=quat[1], y=quat[2], z=quat[3]),
                orientation_covariance=np.zeros(9), angular_velocity=Vector3(*f64_array(record.angular_velocity)),
                angular_velocity_covariance=np.zeros(9), linear_acceleration=Vector3(*f64_array(record.linear_acceleration)),
                linear_acceleration_covariance=np.zeros(9))
        if isinstance(record, OdomRecord):
            header.frame_id = record.frame_id
            quat = f64_array(record.orientation_wxyz)
            pose = T["geometry_msgs/msg/Pose"](position=T["geometry_msgs/msg/Point"](*f64_array(record.position)),
                                               orientation=T["geometry_msgs/msg/Quaternion"](x=quat[1], y=quat[2], z=quat[3],
                                                                                             w=quat[0]))
            twist = T["geometry_msgs/msg/Twist"](linear=Vector3(*f64_array(record.linear_velocity)),
                                                 angular=Vector3(*f64_array(record.angular_velocity)))
            return self.topics["odom"], MSG_TYPES["odom"], T[MSG_TYPES["odom"]](
                header=header, child_frame_id=record.child_frame_id,
                pose=T["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.zeros(36)),
                twist=T["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=np.zeros(36)))
        if isinstance(record, TwistRecord):
            return self.topics["cmd_vel"], MSG_TYPES["cmd_vel"], T[MSG_TYPES["cmd_vel"]](
                linear=Vector3(*f64_array(record.linear)), angular=Vector3(*f64_array(record.angular)))
        if isinstance(record, JointCommandRecord):
            return self.topics["joint_commands"], MSG_TYPES["joint_commands"], _float_array(T, f64_array(record.values), "joints")
        if isinstance(record, VectorRecord):
            values = f64_array(record.values)
            if values.size == 3:
                header.frame_id = record.frame_id
                msgtype = "geometry_msgs/msg/PointStamped"
                return record.topic, msgtype, T[msgtype](header=header, point=T["geometry_msgs/msg/Point"](*values))
            return record.topic, "std_msgs/msg/Float64MultiArray", _float_array(T, values, record.topic.rsplit("/", 1)[-1])
        if isinstance(record, PoseRecord):
            x, y, z, qw, qx, qy, qz = f64_array(record.pose)
            header.frame_id = record.frame_id
            pose = T["geometry_msgs/msg/Pose"](position=T["geometry_msgs/msg/Point"](x=x, y=y, z=z),
                                               orientation=T["geometry_msgs/msg/Quaternion"](x=qx, y=qy, z=qz, w=qw))
            return record.topic, POSE_STAMPED, T[POSE_STAMPED](header=header, pose=pose)
        if isinstance(record, PolicyStepRecord):
            return self.topics["policy_step"], MSG_TYPES["policy_step"], T[MSG_TYPES["policy_step"]](
                header=header, step=record.step, episode=record.episode, observation=f32_array(record.observation),
                action_raw=f32_array(record.action_raw), action_filtered=f64_array(record.action_filtered),
                safety_state=record.safety_state, safety_reason=record.safety_reason,
                input_stamp=_time(T, record.input_ns), compute_time=record.compute_time_s)
        raise ValueError(f"unknown record {type(record).__name__}")

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


def _time(T, stamp_ns: int):
    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    return T["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


def _float_array(T, values: np.ndarray, label: str):
    layout = T["std_msgs/msg/MultiArrayLayout"](
        dim=[T["std_msgs/msg/MultiArrayDimension"](label=label, size=values.size, stride=values.size)], data_offset=0)
    return T["std_msgs/msg/Float64MultiArray"](layout=layout, data=values)


# The worker process.


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
