# SPDX-License-Identifier: BSD-3-Clause
"""Reading rosbag2 bags (MCAP or sqlite3) into numpy arrays, and recovering damaged MCAP files.

`open_bag(path)` returns a `BagLog`: per-topic time series as arrays (joint states, joint
commands, policy steps, IMU, odometry, velocity and task commands), the batonlab metadata and what went
wrong on the way. Types are always taken from the definitions stored in the bag.

An intact bag is read with rosbags' `AnyReader`. When that fails on an MCAP file (no footer
after a crash, a file cut mid-chunk, a damaged chunk), the file is scanned record by record and
everything before the damage is kept, including the complete messages of a cut, uncompressed
chunk; `BagLog.truncated` and `BagLog.warnings` say what was lost. Anything that is not a bag
raises `BagError` with a message that says what was expected.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from batonlab.deploy.bag_format import (
    COMMAND_TOPIC_PREFIX,
    DEFAULT_TOPICS,
    POLICY_STEP_TYPE,
    POSE_STAMPED,
    SENSOR_TOPIC_PREFIX,
)
from batonlab.logs.mcap_recovery import MCAP_MAGIC, scan_mcap

SQLITE_MAGIC = b"SQLite format 3\x00"


class BagError(Exception):
    """Not a bag, an unreadable bag, or a bag without what the caller needs."""


# Per-topic arrays.


@dataclass
class TopicInfo:
    """One topic's type, message count and log-time span [s since bag start]."""
    topic: str
    msgtype: str
    count: int
    first_s: float
    """Log time of the first message, seconds since the bag's start."""
    last_s: float

    @property
    def rate_hz(self) -> float:
        """Mean message rate over the topic's own span (0 for fewer than two messages)."""
        span = self.last_s - self.first_s
        return (self.count - 1) / span if self.count > 1 and span > 0 else 0.0


@dataclass
class JointStates:
    """A bag's sensor_msgs/JointState messages as arrays (N messages, J joints)."""
    t: np.ndarray
    """(N,) log time [s since bag start]."""
    stamp: np.ndarray
    """(N,) header stamp [s since bag start]."""
    names: tuple[str, ...]
    position: np.ndarray
    """(N, J) [rad or m]."""
    velocity: np.ndarray
    """(N, J) [rad/s or m/s]; NaN where the message had none."""
    effort: np.ndarray
    """(N, J) [N·m or N]; NaN where the message had none."""

    def columns(self, names) -> np.ndarray:
        """Column indices of joint `names` (BagError if one is missing)."""
        missing = [n for n in names if n not in self.names]
        if missing:
            raise BagError(f"joint_states has no joints {missing}; it has {list(self.names)}")
        return np.array([self.names.index(n) for n in names], dtype=int)


@dataclass
class Vectors:
    """A topic of flat numeric messages as arrays (N messages, D values)."""
    t: np.ndarray
    """(N,) log time [s since bag start]."""
    values: np.ndarray
    """(N, D)."""
    stamp: np.ndarray | None = None
    """(N,) header stamps, for stamped messages."""


@dataclass
class ImuSeries:
    """A bag's sensor_msgs/Imu messages as arrays; `t` is (N,) log time [s since bag start]."""
    t: np.ndarray
    orientation_wxyz: np.ndarray
    """(N, 4)."""
    angular_velocity: np.ndarray
    """(N, 3) [rad/s]."""
    linear_acceleration: np.ndarray
    """(N, 3) [m/s²]."""


@dataclass
class OdomSeries:
    """Base odometry (nav_msgs/Odometry). Pose of `child_frame_id` in `frame_id`; twist in
    `child_frame_id` (REP-105), or in `frame_id` when `child_frame_id` is empty (`bag_format`)."""

    t: np.ndarray
    """(N,) log time [s since bag start]."""
    stamp: np.ndarray
    """(N,) header stamp [s since bag start]."""
    position: np.ndarray
    """(N, 3) [m]."""
    orientation_wxyz: np.ndarray
    """(N, 4)."""
    linear: np.ndarray
    """(N, 3) linear velocity as logged [m/s]."""
    angular: np.ndarray
    """(N, 3) angular velocity as logged [rad/s]."""
    frame_id: str = "odom"
    child_frame_id: str = ""

    def twist_world_body(self) -> tuple[np.ndarray, np.ndarray]:
        """(linear velocity in `frame_id` (N, 3) [m/s], angular velocity in the body frame (N, 3) [rad/s]):
        the velocities a floating base's free joint holds (MuJoCo: linear in the world, angular in the body)."""
        rot = quat_to_matrix(self.orientation_wxyz)  # body → odom frame
        if self.child_frame_id:
            return np.einsum("nij,nj->ni", rot, self.linear), self.angular.copy()
        return self.linear.copy(), np.einsum("nji,nj->ni", rot, self.angular)

    @property
    def yaw(self) -> np.ndarray:
        """(N,) heading of the base about the odom frame's z axis [rad]."""
        return quat_yaw(self.orientation_wxyz)


def quat_to_matrix(wxyz: np.ndarray) -> np.ndarray:
    """(N, 3, 3) rotation matrices of (N, 4) unit quaternions (w, x, y, z); normalised first."""
    q = np.asarray(wxyz, dtype=np.float64)
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.stack([
        np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], axis=-1),
        np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], axis=-1),
        np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], axis=-1),
    ], axis=-2)


def quat_yaw(wxyz: np.ndarray) -> np.ndarray:
    """Yaw (rotation about z, ZYX convention) of (…, 4) quaternions (w, x, y, z) [rad]."""
    q = np.asarray(wxyz, dtype=np.float64)
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    return np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


@dataclass
class PolicySteps:
    """The policy node's per-step records (observation, actions, safety state) as arrays."""
    t: np.ndarray
    """(N,) log time [s since bag start]."""
    step: np.ndarray
    episode: np.ndarray
    observation: np.ndarray
    """(N, obs_dim) float32."""
    action_raw: np.ndarray
    """(N, action_dim) float32."""
    action_filtered: np.ndarray
    """(N, num_joints) float64; NaN rows where the step sent no command."""
    safety_state: list[str]
    safety_reason: list[str]
    input_stamp: np.ndarray
    """(N,) header stamp of the joint states each step used [s since bag start]; NaN if not recorded."""
    compute_time: np.ndarray
    """(N,) [s]."""


@dataclass
class BagLog:
    """A bag as arrays. Times are seconds since `start_ns` (the first message's log time)."""

    path: Path
    start_ns: int
    end_ns: int
    metadata: dict[str, Any]
    """The batonlab metadata (empty for bags batonlab did not write)."""
    topics: dict[str, TopicInfo]
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)
    joint_states: JointStates | None = None
    joint_commands: Vectors | None = None
    policy_steps: PolicySteps | None = None
    imu: ImuSeries | None = None
    odom: OdomSeries | None = None
    cmd_vel: Vectors | None = None
    """(N, 6): linear xyz, angular xyz."""
    task_commands: dict[str, Vectors] = field(default_factory=dict)
    """Task commands by name (`/commands/<name>`)."""
    sensors: dict[str, Vectors] = field(default_factory=dict)
    """Named sensors the policy reads (`/sensors/<name>`); a pose sensor's values are (N, 7): x, y, z [m],
    then the quaternion qw, qx, qy, qz, as received."""
    storage: str = "mcap"

    @property
    def duration_s(self) -> float:
        """Log time from the first to the last message [s]."""
        return (self.end_ns - self.start_ns) * 1e-9

    @property
    def velocity_command_joints(self) -> list[str]:
        """Joints whose logged commands are velocity targets [rad/s] (wheels), by the manifest in the metadata."""
        actions = (self.metadata.get("manifest") or {}).get("actions") or []
        return [j for a in actions if isinstance(a, dict) and a.get("type") == "joint_velocity" for j in a.get("joints", [])]

    @property
    def command_joint_names(self) -> list[str]:
        """Joint order of `joint_commands` (metadata, else the joint-state names)."""
        names = self.metadata.get("command_joint_names") or self.metadata.get("joint_names")
        if names:
            return list(names)
        if self.joint_states is not None and self.joint_commands is not None:
            if self.joint_commands.values.shape[1] == len(self.joint_states.names):
                return list(self.joint_states.names)
        raise BagError(f"{self.path}: the joint order of joint_commands is unknown (no batonlab metadata)")

    def require(self, purpose: str, *roles: str) -> None:
        """Raise BagError naming the missing topics if any role in `roles` has no messages."""
        missing = [r for r in roles if _series(self, r) is None]
        if missing:
            topics = self.metadata.get("topics", DEFAULT_TOPICS)
            names = [topics.get(r, DEFAULT_TOPICS.get(r, r)) for r in missing]
            have = ", ".join(f"{t} ({i.count})" for t, i in sorted(self.topics.items())) or "none"
            raise BagError(f"{self.path}: {purpose} needs the topic(s) {names}, which the bag does not have "
                           f"(topics: {have})")


def _series(log: BagLog, role: str):
    if role == "task_commands":
        return log.task_commands or None
    return getattr(log, {"policy_step": "policy_steps"}.get(role, role), None)


# Opening.


@dataclass
class RawMessage:
    """One deserialized message with its topic, type and log time [ns]."""
    topic: str
    msgtype: str
    log_ns: int
    msg: Any


@dataclass
class RawBag:
    """Deserialised messages in log-time order, plus what is known about the bag."""

    path: Path
    connections: dict[str, str]
    """topic → message type."""
    messages: list[RawMessage]
    metadata_yaml: dict[str, Any]
    truncated: bool = False
    warnings: list[str] = field(default_factory=list)
    storage: str = "mcap"


def read_bag(path: str | Path) -> RawBag:
    """Every message of a bag, deserialised with the types stored in it.

    Raises:
        BagError: not a bag, or nothing readable in it.
    """
    path = Path(path)
    bag_dir, files, storage, metadata_yaml = _locate(path)
    if storage == "sqlite3":
        return _read_anyreader(path, bag_dir, files, storage, metadata_yaml)
    try:
        return _read_anyreader(path, bag_dir, files, storage, metadata_yaml)
    except _AnyReaderFailed as failure:
        reason = failure.reason
    messages, connections, truncated, warnings = [], {}, False, []
    for file in files:
        try:
            result = scan_mcap(file)
        except ValueError as err:
            raise BagError(str(err)) from None
        messages += [RawMessage(*m) for m in result.messages]
        connections.update(result.connections)
        truncated |= result.truncated
        warnings += result.warnings
    if not messages:
        raise BagError(f"{path}: nothing readable ({'; '.join(warnings) or reason})")
    messages.sort(key=lambda m: m.log_ns)
    if not truncated:
        warnings.append(f"the bag's index could not be read ({reason}); read it by scanning the file")
    return RawBag(path, connections, messages, metadata_yaml, truncated, warnings, storage)


def open_bag(path: str | Path) -> BagLog:
    """A bag as arrays (see `BagLog`)."""
    return to_arrays(read_bag(path))


class _AnyReaderFailed(Exception):
    def __init__(self, reason: str):
        self.reason = reason


def _locate(path: Path) -> tuple[Path, list[Path], str, dict]:
    """(bag folder, storage files, storage id, metadata.yaml contents) for a folder or a file."""
    if not path.exists():
        raise BagError(f"{path} does not exist")
    if path.is_file() and path.name == "metadata.yaml":
        path = path.parent
    if path.is_dir():
        metadata_yaml = _load_metadata_yaml(path / "metadata.yaml")
        info = metadata_yaml.get("rosbag2_bagfile_information", {})
        files = [path / f for f in info.get("relative_file_paths", [])]
        files = [f for f in files if f.is_file()] or sorted(path.glob("*.mcap")) or sorted(path.glob("*.db3"))
        if not files:
            raise BagError(f"{path} is not a rosbag2 bag: expected metadata.yaml and .mcap (or .db3) files in it, "
                           f"found {sorted(p.name for p in path.iterdir())[:10]}")
        storage = "sqlite3" if files[0].suffix == ".db3" else "mcap"
        if storage == "mcap":
            for f in files:
                _check_magic(f)
        return path, files, storage, metadata_yaml
    head = _check_magic(path) if path.suffix != ".db3" else SQLITE_MAGIC
    storage = "sqlite3" if head == SQLITE_MAGIC else "mcap"
    metadata_yaml = {}
    sibling = path.parent / "metadata.yaml"
    if sibling.is_file():
        candidate = _load_metadata_yaml(sibling)
        if path.name in candidate.get("rosbag2_bagfile_information", {}).get("relative_file_paths", []):
            metadata_yaml = candidate
    return path.parent, [path], storage, metadata_yaml


def _check_magic(file: Path) -> bytes:
    with open(file, "rb") as f:
        head = f.read(16)
    if head.startswith(MCAP_MAGIC) or head == SQLITE_MAGIC:
        return head[: len(MCAP_MAGIC)] if head.startswith(MCAP_MAGIC) else head
    if not head:
        raise BagError(f"{file} is empty: not a rosbag2 bag")
    raise BagError(f"{file} is not a rosbag2 bag: an MCAP file starts with {MCAP_MAGIC!r}, this one with {head[:8]!r} "
                   "(pass the bag folder holding metadata.yaml, or its .mcap file)")


def _load_metadata_yaml(file: Path) -> dict:
    if not file.is_file():
        return {}
    import yaml

    try:
        data = yaml.safe_load(file.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise BagError(f"{file} is not valid YAML: {err}") from None
    if not isinstance(data, dict) or "rosbag2_bagfile_information" not in data:
        raise BagError(f"{file} is not rosbag2 metadata (no rosbag2_bagfile_information)")
    return data


def _read_anyreader(path: Path, bag_dir: Path, files: list[Path], storage: str, metadata_yaml: dict) -> RawBag:
    from rosbags.highlevel import AnyReader, AnyReaderError
    from rosbags.rosbag2 import ReaderError

    target = bag_dir if metadata_yaml else files[0]
    if len(files) > 1 and not metadata_yaml:
        raise BagError(f"{path}: several storage files {[f.name for f in files]} but no metadata.yaml to order them")
    messages = []
    try:
        with AnyReader([target]) as reader:
            connections = {c.topic: c.msgtype for c in reader.connections}
            for conn, log_ns, raw in reader.messages():
                messages.append(RawMessage(conn.topic, conn.msgtype, log_ns, reader.deserialize(raw, conn.msgtype)))
    except (AnyReaderError, ReaderError, FileNotFoundError) as err:
        if storage == "sqlite3":
            raise BagError(f"{path}: unreadable sqlite3 bag: {err}") from None
        raise _AnyReaderFailed(str(err) or type(err).__name__) from None
    except Exception as err:  # noqa: BLE001 - a damaged file can fail anywhere in the reader; scan it instead
        if storage == "sqlite3":
            raise BagError(f"{path}: unreadable sqlite3 bag: {err}") from None
        raise _AnyReaderFailed(str(err) or type(err).__name__) from None
    messages.sort(key=lambda m: m.log_ns)
    return RawBag(path, connections, messages, metadata_yaml, storage=storage)


# Arrays.


def _role_topics(raw: RawBag, metadata: dict) -> dict[str, str | None]:
    """Which topic plays which role: the metadata's map, else batonlab's defaults, else by type."""
    declared = {**DEFAULT_TOPICS, **metadata.get("topics", {})}
    by_type = defaultdict(list)
    for topic, msgtype in raw.connections.items():
        by_type[msgtype].append(topic)
    roles = {}
    for role, msgtype in (("joint_states", "sensor_msgs/msg/JointState"), ("imu", "sensor_msgs/msg/Imu"),
                          ("odom", "nav_msgs/msg/Odometry"), ("cmd_vel", "geometry_msgs/msg/Twist"), ("joint_commands", "std_msgs/msg/Float64MultiArray"),
                          ("policy_step", POLICY_STEP_TYPE), ("metadata", "std_msgs/msg/String")):
        topic = declared.get(role)
        if topic in raw.connections:
            roles[role] = topic
        elif role != "joint_commands" and len(by_type.get(msgtype, [])) == 1:
            roles[role] = by_type[msgtype][0]
        else:
            roles[role] = None
    return roles


def _metadata(raw: RawBag) -> dict[str, Any]:
    custom = raw.metadata_yaml.get("rosbag2_bagfile_information", {}).get("custom_data") or {}
    if "batonlab" in custom:
        try:
            return json.loads(custom["batonlab"])
        except json.JSONDecodeError:
            pass
    topic = DEFAULT_TOPICS["metadata"]
    for m in raw.messages:
        if m.topic == topic and m.msgtype == "std_msgs/msg/String":
            try:
                return json.loads(m.msg.data)
            except json.JSONDecodeError:
                raw.warnings.append(f"{topic} does not hold JSON; metadata ignored")
                return {}
    return {}


def to_arrays(raw: RawBag) -> BagLog:
    """Arrays from deserialised messages (see `BagLog`)."""
    if not raw.messages:
        raise BagError(f"{raw.path}: the bag holds no messages")
    metadata = _metadata(raw)
    start_ns, end_ns = raw.messages[0].log_ns, raw.messages[-1].log_ns
    by_topic: dict[str, list[RawMessage]] = defaultdict(list)
    for m in raw.messages:
        by_topic[m.topic].append(m)
    topics = {
        t: TopicInfo(t, raw.connections.get(t, msgs[0].msgtype), len(msgs), (msgs[0].log_ns - start_ns) * 1e-9,
                     (msgs[-1].log_ns - start_ns) * 1e-9)
        for t, msgs in by_topic.items()
    }
    for t, msgtype in raw.connections.items():
        topics.setdefault(t, TopicInfo(t, msgtype, 0, 0.0, 0.0))
    log = BagLog(raw.path, start_ns, end_ns, metadata, topics, raw.truncated, list(raw.warnings), storage=raw.storage)
    roles = _role_topics(raw, metadata)

    def rel(ns) -> np.ndarray:
        return (np.asarray(ns, dtype=np.int64) - start_ns) * 1e-9

    def stamp_ns(header) -> int:
        return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)

    if msgs := by_topic.get(roles["joint_states"] or ""):
        log.joint_states = _joint_states(msgs, rel, stamp_ns)
    if msgs := by_topic.get(roles["joint_commands"] or ""):
        width = max(len(m.msg.data) for m in msgs)
        values = np.full((len(msgs), width), np.nan)
        for i, m in enumerate(msgs):
            values[i, : len(m.msg.data)] = m.msg.data
        log.joint_commands = Vectors(rel([m.log_ns for m in msgs]), values)
    if msgs := by_topic.get(roles["policy_step"] or ""):
        log.policy_steps = _policy_steps(msgs, rel, stamp_ns)
    if msgs := by_topic.get(roles["imu"] or ""):
        log.imu = ImuSeries(
            rel([m.log_ns for m in msgs]),
            np.array([[m.msg.orientation.w, m.msg.orientation.x, m.msg.orientation.y, m.msg.orientation.z] for m in msgs]),
            np.array([[m.msg.angular_velocity.x, m.msg.angular_velocity.y, m.msg.angular_velocity.z] for m in msgs]),
            np.array([[m.msg.linear_acceleration.x, m.msg.linear_acceleration.y, m.msg.linear_acceleration.z] for m in msgs]),
        )
    if msgs := by_topic.get(roles["odom"] or ""):
        log.odom = _odom(msgs, rel, stamp_ns)
    if msgs := by_topic.get(roles["cmd_vel"] or ""):
        log.cmd_vel = Vectors(rel([m.log_ns for m in msgs]), np.array(
            [[m.msg.linear.x, m.msg.linear.y, m.msg.linear.z, m.msg.angular.x, m.msg.angular.y, m.msg.angular.z] for m in msgs]))
    for topic, msgs in by_topic.items():
        for prefix, target in ((COMMAND_TOPIC_PREFIX, log.task_commands), (SENSOR_TOPIC_PREFIX, log.sensors)):
            if not topic.startswith(prefix):
                continue
            if msgs[0].msgtype == "geometry_msgs/msg/PointStamped":
                values = np.array([[m.msg.point.x, m.msg.point.y, m.msg.point.z] for m in msgs])
                stamps = rel([stamp_ns(m.msg.header) for m in msgs])
            elif msgs[0].msgtype == POSE_STAMPED:
                poses = [m.msg.pose for m in msgs]
                values = np.array([[p.position.x, p.position.y, p.position.z, p.orientation.w, p.orientation.x,
                                    p.orientation.y, p.orientation.z] for p in poses])
                stamps = rel([stamp_ns(m.msg.header) for m in msgs])
            elif msgs[0].msgtype == "std_msgs/msg/Float64MultiArray":
                width = max(len(m.msg.data) for m in msgs)
                values = np.full((len(msgs), width), np.nan)
                for i, m in enumerate(msgs):
                    values[i, : len(m.msg.data)] = m.msg.data
                stamps = None
            else:
                log.warnings.append(f"{topic}: unexpected type {msgs[0].msgtype}; not read as a vector")
                continue
            target[topic[len(prefix):]] = Vectors(rel([m.log_ns for m in msgs]), values, stamps)
    return log


def _joint_states(msgs: list[RawMessage], rel, stamp_ns) -> JointStates:
    names: list[str] = []
    for m in msgs:  # union of names, in first-seen order
        for n in m.msg.name:
            if n not in names:
                names.append(n)
    index = {n: i for i, n in enumerate(names)}
    n, j = len(msgs), len(names)
    position, velocity, effort = np.full((n, j), np.nan), np.full((n, j), np.nan), np.full((n, j), np.nan)
    for i, m in enumerate(msgs):
        msg = m.msg
        cols = slice(0, j) if list(msg.name) == names else np.array([index[x] for x in msg.name], dtype=int)
        if len(msg.position) == len(msg.name):
            position[i, cols] = msg.position
        if len(msg.velocity) == len(msg.name):
            velocity[i, cols] = msg.velocity
        if len(msg.effort) == len(msg.name):
            effort[i, cols] = msg.effort
    return JointStates(rel([m.log_ns for m in msgs]), rel([stamp_ns(m.msg.header) for m in msgs]), tuple(names),
                       position, velocity, effort)


def _odom(msgs: list[RawMessage], rel, stamp_ns) -> OdomSeries:
    poses = [m.msg.pose.pose for m in msgs]
    twists = [m.msg.twist.twist for m in msgs]
    return OdomSeries(
        t=rel([m.log_ns for m in msgs]),
        stamp=rel([stamp_ns(m.msg.header) for m in msgs]),
        position=np.array([[p.position.x, p.position.y, p.position.z] for p in poses]),
        orientation_wxyz=np.array([[p.orientation.w, p.orientation.x, p.orientation.y, p.orientation.z] for p in poses]),
        linear=np.array([[w.linear.x, w.linear.y, w.linear.z] for w in twists]),
        angular=np.array([[w.angular.x, w.angular.y, w.angular.z] for w in twists]),
        frame_id=msgs[0].msg.header.frame_id,
        child_frame_id=msgs[0].msg.child_frame_id,
    )


def _policy_steps(msgs: list[RawMessage], rel, stamp_ns) -> PolicySteps:
    def stack(rows: Iterable[np.ndarray], dtype) -> np.ndarray:
        rows = [np.asarray(r, dtype=dtype) for r in rows]
        width = max((r.size for r in rows), default=0)
        out = np.full((len(rows), width), np.nan, dtype=dtype)
        for i, r in enumerate(rows):
            out[i, : r.size] = r
        return out

    input_ns = [int(m.msg.input_stamp.sec) * 1_000_000_000 + int(m.msg.input_stamp.nanosec) for m in msgs]
    return PolicySteps(
        t=rel([m.log_ns for m in msgs]),
        step=np.array([m.msg.step for m in msgs], dtype=np.int64),
        episode=np.array([m.msg.episode for m in msgs], dtype=np.int64),
        observation=stack((m.msg.observation for m in msgs), np.float32),
        action_raw=stack((m.msg.action_raw for m in msgs), np.float32),
        action_filtered=stack((m.msg.action_filtered for m in msgs), np.float64),
        safety_state=[m.msg.safety_state for m in msgs],
        safety_reason=[m.msg.safety_reason for m in msgs],
        input_stamp=np.where(np.array(input_ns) > 0, rel(input_ns), np.nan),
        compute_time=np.array([m.msg.compute_time for m in msgs], dtype=np.float64),
    )
