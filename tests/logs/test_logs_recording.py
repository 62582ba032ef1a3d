# SPDX-License-Identifier: BSD-3-Clause
"""BagRecorder: standard readers open its bags, and a failing or stalled disk never stops the caller."""

from __future__ import annotations

import errno
import inspect
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from batonlab.deploy.bag_format import POLICY_STEP_TYPE
from batonlab.deploy.null_recorder import NullRecorder
from batonlab.deploy.recording import BagRecorder
from batonlab.logs.bag_reader import open_bag

JOINTS = [f"joint_{i}" for i in range(20)]
META = {"task": "arm_reach", "robot": "table_arm6", "seed": 7, "manifest_sha256": "ab" * 32, "source": "test"}


def record(path: Path, ticks: int = 100, chunk_bytes: int = 1 << 20, **kwargs) -> BagRecorder:
    """`ticks` control steps at 200 Hz of a 20-joint robot; returns the closed recorder."""
    rec = BagRecorder(path, META, JOINTS, chunk_bytes=chunk_bytes, **kwargs)
    for k in range(ticks):
        stamp = k * 5_000_000
        q = np.sin(0.01 * k + np.arange(20))
        rec.joint_state(stamp, q, np.cos(q), np.full(20, 0.5))
        rec.imu(stamp, [1.0, 0.0, 0.0, 0.0], [0.0, 0.1, 0.0], [0.0, 0.0, 9.81], frame_id="base")
        yaw = 0.01 * k  # a base turning left while driving forward at 0.5 m/s (twist in the base frame)
        rec.odom(stamp, [0.5 * k * 0.005, 0.0, 0.4], [np.cos(yaw / 2), 0.0, 0.0, np.sin(yaw / 2)], [0.5, 0.0, 0.0],
                 [0.0, 0.0, 2.0], child_frame_id="base", header_ns=stamp + 1000)
        rec.twist(stamp, [0.3, 0.0, 0.0], [0.0, 0.0, 0.2])
        rec.task_command("ee_target", stamp, [0.4, 0.1, 0.3], frame_id="base")
        rec.sensor("foot_forces", stamp, [1.0, 2.0, 3.0, 4.0])
        rec.joint_command(stamp, q + 0.1)
        rec.policy_step(stamp, k, np.arange(66, dtype=np.float32) * k, np.full(20, 0.25), q + 0.1, "run", "ok")
    rec.close()
    return rec


def test_anyreader_with_empty_typestore_reads_every_type_from_the_bag(tmp_path):
    from rosbags.highlevel import AnyReader
    from rosbags.typesys import Stores, get_typestore

    rec = record(tmp_path / "bag")
    assert rec.ok and rec.written == 8 * 100 + 1 and rec.dropped == 0
    with AnyReader([tmp_path / "bag"], default_typestore=get_typestore(Stores.EMPTY)) as reader:
        # The reader's own typestore starts empty: every type below was registered from the bag's definitions.
        assert POLICY_STEP_TYPE in reader.typestore.fielddefs
        counts = {c.topic: c.msgcount for c in reader.connections}
        assert counts == {"/batonlab/metadata": 1, "/joint_states": 100, "/imu": 100, "/odom": 100, "/cmd_vel": 100,
                          "/commands/ee_target": 100, "/sensors/foot_forces": 100, "/joint_commands": 100,
                          "/batonlab/policy_step": 100}
        steps = [reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages()
                 if c.topic == "/batonlab/policy_step"]
        states = [reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages() if c.topic == "/joint_states"]
        meta = [reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages() if c.topic == "/batonlab/metadata"]
    assert [s.step for s in steps] == list(range(100))
    np.testing.assert_array_equal(steps[3].observation, np.arange(66, dtype=np.float32) * 3)
    assert steps[3].safety_state == "run" and steps[3].action_raw.dtype == np.float32
    assert list(states[0].name) == JOINTS and states[5].header.stamp.nanosec == 25_000_000
    assert json.loads(meta[0].data)["task"] == "arm_reach"
    custom = __import__("yaml").safe_load((tmp_path / "bag" / "metadata.yaml").read_text())
    custom = custom["rosbag2_bagfile_information"]["custom_data"]
    assert custom["batonlab.manifest_sha256"] == "ab" * 32 and custom["batonlab.seed"] == "7"
    assert json.loads(custom["batonlab"])["joint_names"] == JOINTS


def test_mcap_reader_opens_the_bag(tmp_path):
    from mcap.reader import make_reader

    record(tmp_path / "bag", chunk_bytes=8192)
    (mcap_file,) = (tmp_path / "bag").glob("*.mcap")
    with open(mcap_file, "rb") as f:
        reader = make_reader(f)
        summary = reader.get_summary()
        schemas = {s.name: s for s in summary.schemas.values()}
        assert schemas[POLICY_STEP_TYPE].encoding == "ros2msg"
        assert b"float32[] observation" in schemas[POLICY_STEP_TYPE].data
        assert summary.statistics.message_count == 801 and summary.statistics.chunk_count > 5
        topics = {c.topic for c in summary.channels.values()}
        assert {"/joint_states", "/batonlab/policy_step", "/joint_commands"} <= topics
        per_topic = {}
        for _, channel, message in reader.iter_messages():
            per_topic[channel.topic] = per_topic.get(channel.topic, 0) + 1
        assert per_topic["/joint_states"] == 100
        assert any(m.name == "rosbag2" for m in reader.iter_metadata())


def test_arrays_round_trip(tmp_path):
    record(tmp_path / "bag")
    log = open_bag(tmp_path / "bag")
    assert not log.truncated and log.metadata["robot"] == "table_arm6"
    assert log.joint_states.position.shape == (100, 20) and log.joint_states.names == tuple(JOINTS)
    np.testing.assert_allclose(log.joint_states.position[10], np.sin(0.1 + np.arange(20)))
    np.testing.assert_allclose(log.joint_commands.values - log.joint_states.position, 0.1)
    assert log.policy_steps.observation.shape == (100, 66) and log.policy_steps.safety_state[0] == "run"
    assert log.cmd_vel.values[0].tolist() == [0.3, 0.0, 0.0, 0.0, 0.0, 0.2]
    odom = log.odom
    assert (odom.frame_id, odom.child_frame_id) == ("odom", "base") and odom.position.shape == (100, 3)
    np.testing.assert_allclose(odom.stamp - odom.t, 1e-6)
    np.testing.assert_allclose(odom.position[10], [0.025, 0.0, 0.4])
    np.testing.assert_allclose(odom.yaw, 0.01 * np.arange(100), atol=1e-12)
    linear_w, angular_b = odom.twist_world_body()  # base frame → odom frame for the linear part
    np.testing.assert_allclose(linear_w[50], [0.5 * np.cos(0.5), 0.5 * np.sin(0.5), 0.0], atol=1e-12)
    np.testing.assert_allclose(angular_b[50], [0.0, 0.0, 2.0])
    assert log.task_commands["ee_target"].values.shape == (100, 3)
    assert log.sensors["foot_forces"].values[0].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert log.topics["/joint_states"].rate_hz == pytest.approx(200.0)
    assert log.duration_s == pytest.approx(0.495)


def test_disk_full_stops_recording_not_the_caller(tmp_path, monkeypatch):
    from rosbags.rosbag2 import Writer

    original = Writer.write
    calls = {"n": 0}

    def write(self, connection, timestamp, data):
        calls["n"] += 1
        if calls["n"] > 150:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(self, connection, timestamp, data)

    monkeypatch.setattr(Writer, "write", write)
    rec = BagRecorder(tmp_path / "bag", META, JOINTS, chunk_bytes=4096, isolate=False)  # the writer in this process
    start = time.perf_counter()
    for k in range(400):
        rec.joint_state(k * 5_000_000, np.zeros(20), np.zeros(20))
        rec.policy_step(k * 5_000_000, k, np.zeros(66), np.zeros(20), np.zeros(20), "run")
        if k == 200:
            deadline = time.monotonic() + 10.0
            while rec.ok and time.monotonic() < deadline:
                time.sleep(0.01)
    status = rec.close()
    assert time.perf_counter() - start < 30.0
    assert not status["recording_ok"] and "No space left on device" in status["recording_error"]
    assert rec.dropped > 0 and 100 < rec.written <= 150
    # What reached the disk before the failure is still a readable (truncated) bag.
    log = open_bag(tmp_path / "bag")
    assert log.truncated and 0 < log.joint_states.t.size <= 75


def test_a_stalled_disk_never_blocks_the_caller(tmp_path, monkeypatch):
    from rosbags.rosbag2 import Writer

    original = Writer.write

    def slow_write(self, connection, timestamp, data):
        time.sleep(0.05)
        return original(self, connection, timestamp, data)

    monkeypatch.setattr(Writer, "write", slow_write)
    rec = BagRecorder(tmp_path / "bag", META, JOINTS, queue_size=50, isolate=False)
    worst = 0.0
    for k in range(300):
        start = time.perf_counter()
        rec.joint_state(k * 5_000_000, np.zeros(20), np.zeros(20))
        worst = max(worst, time.perf_counter() - start)
    assert worst < 0.02 and rec.dropped >= 200
    monkeypatch.setattr(Writer, "write", original)
    assert rec.close()["recording_ok"]


def test_a_stopped_writer_process_never_blocks_the_caller(tmp_path):
    import os
    import signal

    rec = BagRecorder(tmp_path / "bag", META, JOINTS, queue_size=2000, forward_interval_s=0.01)
    os.kill(rec._process.pid, signal.SIGSTOP)  # a writer that makes no progress (a hung disk)
    try:
        worst = 0.0
        for k in range(20000):  # ~16 MB: more than the pipe and the queue hold
            start = time.perf_counter()
            rec.joint_state(k * 5_000_000, np.full(20, float(k)), np.zeros(20), np.zeros(20))
            rec.policy_step(k * 5_000_000, k, np.zeros(66), np.zeros(20), np.zeros(20), "run")
            worst = max(worst, time.perf_counter() - start)
        assert rec.dropped > 0 and worst < 0.05
    finally:
        os.kill(rec._process.pid, signal.SIGCONT)
    status = rec.close()
    assert status["recording_ok"] and status["recording_written"] == 40001 - status["recording_dropped"]
    log = open_bag(tmp_path / "bag")
    assert not log.truncated and log.joint_states.t.size + log.policy_steps.t.size == 40000 - rec.dropped



def test_close_ends_within_its_timeout_when_the_writer_hangs(tmp_path):
    """`close(timeout_s)` bounds all of it (forwarding the queue, the writer's summary and exit), so a process that
    stops a recording one and waits longer than `CLOSE_TIMEOUT_S` (`batonlab deploy --sim`) never cuts a bag off."""
    import os
    import signal

    from batonlab.cli.deploy import NODE_STOP_TIMEOUT_S
    from batonlab.deploy.recording import CLOSE_TIMEOUT_S

    assert NODE_STOP_TIMEOUT_S > CLOSE_TIMEOUT_S
    rec = BagRecorder(tmp_path / "bag", META, JOINTS, forward_interval_s=0.01)
    os.kill(rec._process.pid, signal.SIGSTOP)  # a hung disk: the forwarding thread blocks on the full pipe
    for k in range(5000):
        rec.joint_state(k * 5_000_000, np.full(20, float(k)), np.zeros(20), np.zeros(20))
    time.sleep(0.5)
    start = time.monotonic()
    status = rec.close(timeout_s=2.0)
    elapsed = time.monotonic() - start
    assert 2.0 <= elapsed < 3.5, f"close took {elapsed:.1f} s"
    assert not status["recording_ok"] and "did not finish within 2 s" in status["recording_error"]

def test_the_bag_is_closed_when_the_recording_process_dies(tmp_path):
    script = textwrap.dedent(f"""
        import os, signal, time, numpy as np
        from batonlab.deploy.recording import BagRecorder
        rec = BagRecorder({str(tmp_path / 'bag')!r}, {{"task": "t"}}, ["a", "b"], forward_interval_s=0.01)
        for k in range(100):
            rec.joint_state(k * 5_000_000, [0.0, 1.0], [0.0, 0.0])
        time.sleep(0.5)  # forwarded; now die without closing
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == -9, result.stderr
    deadline = time.monotonic() + 30
    while not (tmp_path / "bag" / "metadata.yaml").is_file() and time.monotonic() < deadline:
        time.sleep(0.1)
    log = open_bag(tmp_path / "bag")
    assert not log.truncated and log.joint_states.t.size == 100


def test_file_size_limit_in_a_200hz_loop(tmp_path):
    """A real failing file system (RLIMIT_FSIZE, inherited by the writer process): the 200 Hz loop runs all its
    ticks and reports the failure."""
    script = textwrap.dedent(f"""
        import json, resource, signal, time
        import numpy as np
        from batonlab.deploy.recording import BagRecorder
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (48 * 1024, 48 * 1024))
        rec = BagRecorder({str(tmp_path / 'bag')!r}, {{"task": "t"}}, [f"j{{i}}" for i in range(20)], chunk_bytes=8192)
        period, ticks, start = 0.005, 0, time.perf_counter()
        for k in range(200):
            rec.joint_state(k * 5_000_000, np.zeros(20), np.zeros(20), np.zeros(20))
            rec.policy_step(k * 5_000_000, k, np.zeros(66), np.zeros(20), np.zeros(20), "run")
            ticks += 1
            time.sleep(max(0.0, start + (k + 1) * period - time.perf_counter()))
        print(json.dumps({{"ticks": ticks, **rec.close()}}))
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    status = json.loads(result.stdout.strip().splitlines()[-1])
    assert status["ticks"] == 200
    assert not status["recording_ok"] and "File too large" in status["recording_error"]
    assert "recording to" in result.stderr and "the caller keeps running" in result.stderr


def test_existing_folder_is_refused(tmp_path):
    from batonlab.deploy.recording import RecorderError

    (tmp_path / "bag").mkdir()
    with pytest.raises(RecorderError, match="exists"):
        BagRecorder(tmp_path / "bag", META, JOINTS)


def test_the_null_recorder_has_the_bag_recorders_interface_and_records_nothing():
    public = {name for name in dir(BagRecorder) if not name.startswith("_") or name in ("__enter__", "__exit__")}
    for name in public:
        assert hasattr(NullRecorder, name), f"NullRecorder lacks {name}"
        ours, theirs = getattr(NullRecorder, name), getattr(BagRecorder, name)
        if inspect.isfunction(theirs):
            assert list(inspect.signature(ours).parameters) == list(inspect.signature(theirs).parameters), name
    assert BagRecorder.enabled and not NullRecorder.enabled
    with NullRecorder() as rec:
        rec.joint_state(0, [0.0], [0.0])
        rec.policy_step(0, 1, np.zeros(3), np.zeros(2))
        assert rec.ok and rec.pending == 0 and rec.status() == {}
    assert rec.close() == {}
