# SPDX-License-Identifier: BSD-3-Clause
"""Recording a policy's inputs and outputs to a batonlab bag (`batonlab.deploy.bag_format`) without
ever blocking the control loop.

The `BagRecorder` methods copy their arguments (as bytes, `batonlab.deploy.bag_records`) into a
bounded queue and return; a small thread forwards them through a pipe to a writer process
(`batonlab.deploy.bag_writer`) that builds the messages, serialises them and writes the bag. A write
error (disk full, file system gone) stops the recording, not the caller: `ok` turns False and
`error` says why. The writer process also closes the bag properly if the recording process dies.
This module imports numpy and the standard library only (rosbags is imported where the bag is written).
"""

from __future__ import annotations

import json
import logging
import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from batonlab.deploy.bag_format import COMMAND_TOPIC_PREFIX, DEFAULT_TOPICS, SENSOR_TOPIC_PREFIX, bag_metadata, metadata_json
from batonlab.deploy.bag_records import (
    encode_frame,
    imu_record,
    joint_command_record,
    joint_state_record,
    odom_record,
    policy_step_record,
    pose_record,
    twist_record,
    vector_record,
)
from batonlab.deploy.bag_writer import BagWriter, RecorderError

__all__ = ["CLOSE_TIMEOUT_S", "BagRecorder", "RecorderError"]

log = logging.getLogger("batonlab.deploy.recording")


_STOP = object()

CLOSE_TIMEOUT_S = 20.0
"""The longest `BagRecorder.close` takes by default [s]: a process that stops a recording one (`batonlab deploy
--sim` stopping policy_node) waits longer than this before it kills it, so the bag is never cut off."""


class BagRecorder:
    """A rosbag2 (MCAP) writer that never blocks its caller.

    Every `joint_state` / `policy_step` / … call converts its arrays to bytes, queues them (a few
    µs) and returns. With `isolate=True` (the default, for control loops) a thread forwards the
    queue in batches through a pipe to a writer process, so serialisation and disk I/O neither
    hold this process's GIL nor block it; with `isolate=False` (simulation) a thread of this
    process writes. Chunks are flushed to disk every `chunk_interval_s` or `chunk_bytes`, so a crash
    loses at most that much.

    Args:
        path: Bag folder to create; it must not exist.
        metadata: JSON-able facts about the recording (task, robot, seed, manifest_sha256, …).
        joint_names: Names of the joints in `joint_state` calls (policy / manifest order).
        command_joint_names: Order of the `joint_commands` vector (default: `joint_names`).
        topics: Role → topic overrides of `DEFAULT_TOPICS`.
        queue_size: Pending calls beyond this are dropped (and counted in `dropped`), not waited for.
        chunk_bytes: Flush the current MCAP chunk when it holds this many bytes.
        chunk_interval_s: … or when it is this old (wall time) [s].
        isolate: Write in a separate process (True) or in a thread of this one (False).
        forward_interval_s: With `isolate`, how often the forwarding thread wakes up [s]. It is not
            woken by each call: a thread woken in the middle of a control step would take the CPU
            (and then the GIL) from it.

    Raises:
        RecorderError: The folder exists or cannot be created, or the writer process did not start.
    """

    enabled = True
    """True: calls are recorded (`batonlab.deploy.null_recorder.NullRecorder.enabled` is False)."""

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
        isolate: bool = True,
        forward_interval_s: float = 0.05,
    ):
        self.path = Path(path)
        self.joint_names = tuple(joint_names)
        self.command_joint_names = tuple(command_joint_names if command_joint_names is not None else joint_names)
        self.topics = {**DEFAULT_TOPICS, **(topics or {})}
        self.metadata = bag_metadata(metadata or {}, self.joint_names, self.command_joint_names, self.topics)
        self.queue_size = int(queue_size)
        self.isolate = bool(isolate)
        # Status: written by the forwarding/writing thread, read by anyone.
        self.error: str | None = None
        """Why recording stopped (None while it works)."""
        self.dropped = 0
        """Calls dropped because the queue was full or recording had failed."""
        self.written = 0
        """Messages written to the bag (reported by the writer process about twice a second)."""
        self._failed = False
        self._closed = False
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._closing = threading.Event()
        self.forward_interval_s = float(forward_interval_s)
        try:
            metadata_json(self.metadata)
        except (TypeError, ValueError) as err:
            raise RecorderError(f"bag metadata must be JSON: {err}") from None
        config = {"path": str(self.path), "metadata": self.metadata, "joint_names": list(self.joint_names),
                  "topics": self.topics, "chunk_bytes": int(chunk_bytes), "chunk_interval_s": float(chunk_interval_s)}
        if self.path.exists():
            raise RecorderError(f"cannot create bag {self.path}: it exists already")
        if self.isolate:
            self._start_process(config)
            target = self._forward
        else:
            self._writer = BagWriter(**config)
            target = self._write_here
        self._thread = threading.Thread(target=target, name=f"bag-recorder:{self.path.name}", daemon=True)
        self._thread.start()

    # Status.

    @property
    def ok(self) -> bool:
        """True while messages reach the disk."""
        return not self._failed

    @property
    def pending(self) -> int:
        """Calls queued in this process and not forwarded yet."""
        return self._queue.qsize()

    def status(self) -> dict[str, Any]:
        """Values for diagnostics."""
        return {"recording": str(self.path), "recording_ok": self.ok, "recording_error": self.error,
                "recording_written": self.written, "recording_dropped": self.dropped, "recording_pending": self.pending}

    # Recording (called from the control loop: convert, enqueue, return).

    def joint_state(self, stamp_ns: int, position, velocity=None, effort=None, names: Sequence[str] | None = None,
                    header_ns: int | None = None) -> None:
        """Joint positions [rad or m], velocities and efforts [N·m or N] of `names` (default `joint_names`)."""
        self._put(joint_state_record(stamp_ns, header_ns, names, position, velocity, effort))

    def imu(self, stamp_ns: int, orientation_wxyz, angular_velocity, linear_acceleration, frame_id: str = "",
            header_ns: int | None = None) -> None:
        """Base orientation (quaternion wxyz), angular velocity [rad/s] and proper acceleration [m/s²]."""
        self._put(imu_record(stamp_ns, header_ns, frame_id, orientation_wxyz, angular_velocity, linear_acceleration))

    def odom(self, stamp_ns: int, position, orientation_wxyz, linear_velocity, angular_velocity, frame_id: str = "odom",
             child_frame_id: str = "", header_ns: int | None = None) -> None:
        """Base odometry (nav_msgs/Odometry on the `odom` topic, `/odom` by default).

        Args:
            stamp_ns: Log time [ns].
            position: (3,) position of `child_frame_id` (the robot's root body) in `frame_id` [m].
            orientation_wxyz: (4,) its orientation in `frame_id`.
            linear_velocity: (3,) [m/s] and
            angular_velocity: (3,) [rad/s] of the root body, expressed in `child_frame_id` (REP-105);
                with an empty `child_frame_id`, expressed in `frame_id`.
            header_ns: Header stamp (when the pose was measured) [ns]; default `stamp_ns`.
        """
        self._put(odom_record(stamp_ns, header_ns, frame_id, child_frame_id, position, orientation_wxyz, linear_velocity,
                              angular_velocity))

    def twist(self, stamp_ns: int, linear, angular) -> None:
        """A velocity command [m/s, rad/s]."""
        self._put(twist_record(stamp_ns, linear, angular))

    def joint_command(self, stamp_ns: int, values) -> None:
        """The joint targets sent to the servos, in `command_joint_names` order."""
        self._put(joint_command_record(stamp_ns, values))

    def task_command(self, name: str, stamp_ns: int, values, frame_id: str = "", header_ns: int | None = None) -> None:
        """A task command (e.g. a reach target) on `/commands/<name>`."""
        self._put(vector_record(stamp_ns, header_ns, COMMAND_TOPIC_PREFIX + name, frame_id, values))

    def task_command_pose(self, name: str, stamp_ns: int, values, frame_id: str = "",
                          header_ns: int | None = None) -> None:
        """A pose command (x, y, z [m], qw, qx, qy, qz in `frame_id`, e.g. an end-effector target) on
        `/commands/<name>`, as geometry_msgs/PoseStamped."""
        self._put(pose_record(stamp_ns, header_ns, COMMAND_TOPIC_PREFIX + name, frame_id, values))

    def sensor(self, name: str, stamp_ns: int, values, frame_id: str = "", header_ns: int | None = None) -> None:
        """A sensor the policy reads by name (e.g. the tool point `ee_pos_b`) on `/sensors/<name>`."""
        self._put(vector_record(stamp_ns, header_ns, SENSOR_TOPIC_PREFIX + name, frame_id, values))

    def sensor_pose(self, name: str, stamp_ns: int, values, frame_id: str = "", header_ns: int | None = None) -> None:
        """A pose sensor (x, y, z [m], qw, qx, qy, qz in `frame_id`, e.g. `object_pose`) on `/sensors/<name>`, as
        geometry_msgs/PoseStamped."""
        self._put(pose_record(stamp_ns, header_ns, SENSOR_TOPIC_PREFIX + name, frame_id, values))

    def policy_step(self, stamp_ns: int, step: int, observation, action_raw, action_filtered=None, safety_state: str = "",
                    safety_reason: str = "", episode: int = 0, input_ns: int = 0, compute_time_s: float = 0.0) -> None:
        """One control step: the observation the policy saw, its raw output and the filtered targets."""
        self._put(policy_step_record(stamp_ns, step, episode, observation, action_raw, action_filtered, safety_state,
                                     safety_reason, input_ns, compute_time_s))

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> dict[str, Any]:
        """Write what is queued, the bag's summary and metadata.yaml, within `timeout_s` in all; returns `status()`.

        Never raises on write errors: they end up in `error`. A writer not done by then is stopped and
        the bag ends at its last flushed chunk (`batonlab.logs.bag_reader` recovers it).
        """
        if not self._closed:
            self._closed = True
            deadline = time.monotonic() + timeout_s
            self._queue.put(_STOP)
            self._closing.set()
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                self._fail(f"the writer did not finish within {timeout_s:.0f} s")
            if self.isolate:
                self._stop_process(deadline, timeout_s)
        return self.status()

    def __enter__(self) -> BagRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # Private methods: both modes.

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

    def _batch(self, wait: bool = True) -> tuple[list, bool]:
        """The queued items (with `wait`, waiting for the first), and whether the recorder is closing."""
        items = [self._queue.get()] if wait else []
        while len(items) < 4096:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                break
        stop = any(item is _STOP for item in items)
        return [item for item in items if item is not _STOP], stop

    # Private methods: writing in this process (isolate=False).

    def _write_here(self) -> None:
        while True:
            items, stop = self._batch()
            for item in items:
                if self._failed:
                    self.dropped += 1
                    continue
                try:
                    self._writer.write(item)
                    self.written = self._writer.written
                except Exception as err:  # disk full, file system errors: stop recording, not the caller
                    self._fail(f"{type(err).__name__}: {err}")
                    self._writer.abort()
                # Hand the GIL back between messages: a backlog never delays the caller by more than one.
                time.sleep(20e-6)
            if stop:
                break
        if not self._failed:
            try:
                self._writer.close({"dropped": self.dropped})
                self.written = self._writer.written
            except Exception as err:  # noqa: BLE001 - reported in `error`
                self._fail(f"closing the bag failed: {type(err).__name__}: {err}")
                self._writer.abort()

    # Private methods: the writer process (isolate=True).

    def _start_process(self, config: dict, timeout_s: float = 60.0) -> None:
        import batonlab

        data_r, data_w = os.pipe()
        status_r, status_w = os.pipe()
        try:  # a 1 MiB pipe absorbs a stalled disk for a few seconds before anything is dropped
            import fcntl

            fcntl.fcntl(data_w, 1031, 1 << 20)  # F_SETPIPE_SZ (Linux)
        except (ImportError, OSError):
            pass
        root = str(Path(batonlab.__file__).resolve().parents[1])
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p))
        try:
            # Own session: a Ctrl-C for the process group must not kill the writer before it closes the bag.
            self._process = subprocess.Popen(
                [sys.executable, "-m", "batonlab.deploy.bag_writer", str(data_r), str(status_w)],
                pass_fds=(data_r, status_w), stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        except OSError as err:
            for fd in (data_r, data_w, status_r, status_w):
                os.close(fd)
            raise RecorderError(f"cannot start the bag writer process: {err}") from None
        os.close(data_r)
        os.close(status_w)
        self._data_fd: int | None = data_w
        self._status_fd, self._status_buffer = status_r, b""
        os.set_blocking(status_r, False)
        self._send(config)
        event = self._wait_status(("ready", "error"), timeout_s)
        if event is None or event["event"] != "ready":
            reason = (event or {}).get("error") or f"the bag writer process did not start within {timeout_s:.0f} s"
            self._close_data()
            if self._process.poll() is None:
                self._process.kill()
            self._process.wait()
            os.close(self._status_fd)
            raise RecorderError(reason)

    def _send(self, obj) -> None:
        """One frame to the writer process; blocks while the pipe is full."""
        view = memoryview(encode_frame(obj))
        while view:
            if self._data_fd is None:
                raise BrokenPipeError("the recorder is closed")
            view = view[os.write(self._data_fd, view):]

    def _close_data(self) -> None:
        fd, self._data_fd = self._data_fd, None
        if fd is not None:
            os.close(fd)  # EOF: the writer process closes the bag

    def _forward(self) -> None:
        while True:
            self._closing.wait(self.forward_interval_s)
            items, stop = self._batch(wait=False)
            if items and self._failed:
                self.dropped += len(items)
            elif items:
                try:
                    self._send(items)
                except OSError as err:  # the writer process is gone
                    self._read_status()
                    self._fail(self.error or f"the bag writer process exited ({err})")
            self._read_status()
            if stop:
                break
        self._close_data()

    def _read_status(self) -> tuple[list[dict], bool]:
        """Apply the writer process's new status lines; returns them and whether its end is closed."""
        eof = False
        while True:
            try:
                chunk = os.read(self._status_fd, 65536)
            except (BlockingIOError, InterruptedError):
                break
            if not chunk:
                eof = True
                break
            self._status_buffer += chunk
        *lines, self._status_buffer = self._status_buffer.split(b"\n")
        events = []
        for line in lines:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            events.append(event)
            self.written = int(event.get("written", self.written))
            if event.get("error"):
                self._fail(event["error"])
        return events, eof

    def _wait_status(self, wanted: tuple[str, ...], timeout_s: float) -> dict | None:
        """The first status line of an event in `wanted`, or None (timeout, or the process closed its end)."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self._status_fd], [], [], left)
            if not ready:
                return None
            events, eof = self._read_status()
            for event in events:
                if event.get("event") in wanted:
                    return event
            if eof:
                return None
        return None

    def _stop_process(self, deadline: float, timeout_s: float) -> None:
        self._close_data()
        if self._wait_status(("closed",), deadline - time.monotonic()) is None:
            if self._process.poll() is None:
                self._process.kill()
                self._fail(f"the bag writer process did not finish within {timeout_s:.0f} s")
            else:
                self._fail(f"the bag writer process exited with code {self._process.returncode} before closing the bag")
        try:  # after "closed" the bag is complete and the process only has to return
            self._process.wait(max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._thread.join(1.0)  # one blocked on a killed writer's pipe ends now; it reads the status pipe until then
        os.close(self._status_fd)
