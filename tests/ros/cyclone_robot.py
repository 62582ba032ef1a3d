# SPDX-License-Identifier: BSD-3-Clause
"""A robot driver on Eclipse Cyclone DDS that speaks ROS 2 on the wire, without rclpy.

It stands for the robots and DDS vendors we did not write: a vendor driver that publishes joint
states and listens for joint commands with plain DDS. ROS 2 puts a topic `/name` on the DDS topic
`rt/name` and a message `pkg/msg/Type` on the DDS type `pkg::msg::dds_::Type_`, a final struct
in plain CDR (XCDR1) with the fields of the `.msg` file in order. The types below are written from
those definitions, not generated from ROS: a type that drifted from ROS's would show up in the
tests as messages that are missing or garbled.

Discovery stays on 127.0.0.1 (`cyclonedds_loopback.xml`, the counterpart of deploy_ros's Fast DDS
loopback profile).
"""

# No `from __future__ import annotations`: cyclonedds reads the IDL field types from the class annotations.
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import Domain, DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import float64, int32, sequence, uint32
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

LOOPBACK_CONFIG = Path(__file__).with_name("cyclonedds_loopback.xml")


# ROS 2 messages as DDS types (field order and widths as in the .msg files).


@dataclass
class Time(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: int32
    nanosec: uint32


@dataclass
class Header(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time
    frame_id: str


@dataclass
class JointState(IdlStruct, typename="sensor_msgs::msg::dds_::JointState_"):
    header: Header
    name: sequence[str]
    position: sequence[float64]
    velocity: sequence[float64]
    effort: sequence[float64]


@dataclass
class Point(IdlStruct, typename="geometry_msgs::msg::dds_::Point_"):
    x: float64
    y: float64
    z: float64


@dataclass
class PointStamped(IdlStruct, typename="geometry_msgs::msg::dds_::PointStamped_"):
    header: Header
    point: Point


@dataclass
class Bool(IdlStruct, typename="std_msgs::msg::dds_::Bool_"):
    data: bool


@dataclass
class String(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str


@dataclass
class MultiArrayDimension(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayDimension_"):
    label: str
    size: uint32
    stride: uint32


@dataclass
class MultiArrayLayout(IdlStruct, typename="std_msgs::msg::dds_::MultiArrayLayout_"):
    dim: sequence[MultiArrayDimension] = field(default_factory=list)
    data_offset: uint32 = 0


@dataclass
class Float64MultiArray(IdlStruct, typename="std_msgs::msg::dds_::Float64MultiArray_"):
    layout: MultiArrayLayout
    data: sequence[float64]


def stamp_now() -> Header:
    """A header stamped with the system clock (what ROS 2 stamps with by default)."""
    now = time.time_ns()
    return Header(stamp=Time(sec=now // 1_000_000_000, nanosec=now % 1_000_000_000), frame_id="")


# The driver.


class CycloneRobot:
    """Robot driver on Cyclone DDS: sensors out at `rate_hz`, commands and policy_node's state in.

    Publishes `rt/joint_states` (every joint in one message, positions and velocities),
    `rt/sensors/ee_pos_b` and `rt/commands/ee_target` from one background thread, which also takes
    what arrived on `rt/joint_commands` and `rt/policy_node/state`.

    Args:
        domain_id: DDS domain (the ROS_DOMAIN_ID of the nodes it drives).
        joint_names: Names in every JointState message.
        joint_pos: Positions sent for them [rad].
        rate_hz: Publishing rate of joint states and sensors [Hz].
        reliability: "reliable" or "best_effort" for the sensor writers (KEEP_LAST 1, as drivers
            that only care about the newest reading do).
    """

    def __init__(self, domain_id: int, joint_names, joint_pos, rate_hz: float = 100.0, reliability: str = "reliable"):
        self.joint_names = list(joint_names)
        self.joint_pos = np.asarray(joint_pos, dtype=float)
        self.ee_pos = [0.3, 0.0, 0.3]
        self.ee_target = [0.4, 0.1, 0.3]
        self.publish_joints = True
        self.period_s = 1.0 / rate_hz
        self.lock = threading.Lock()
        self.commands: list[tuple[float, np.ndarray]] = []
        """(time.monotonic() when taken, joint command) for every message on rt/joint_commands."""
        self.states: list[dict] = []
        """policy_node's JSON state reports, with "received" (time.monotonic() when taken)."""

        self.domain = Domain(domain_id, LOOPBACK_CONFIG.as_uri())
        self.participant = DomainParticipant(domain_id)
        sensor_qos = Qos(
            Policy.Reliability.Reliable(duration(milliseconds=100)) if reliability == "reliable" else Policy.Reliability.BestEffort,
            Policy.History.KeepLast(1),
            Policy.Durability.Volatile,
        )
        self.pub_joints = self._writer("rt/joint_states", JointState, sensor_qos)
        self.pub_ee = self._writer("rt/sensors/ee_pos_b", PointStamped, sensor_qos)
        self.pub_target = self._writer("rt/commands/ee_target", PointStamped, sensor_qos)
        # An e-stop is sent once and must arrive: reliable, whatever the sensors use.
        self.pub_estop = self._writer("rt/estop", Bool, Qos(Policy.Reliability.Reliable(duration(milliseconds=100)),
                                                              Policy.History.KeepLast(1)))
        self.sub_commands = DataReader(self.participant, Topic(self.participant, "rt/joint_commands", Float64MultiArray),
                                       qos=Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(100)))
        # ~/state is latched by the node (RELIABLE + TRANSIENT_LOCAL): ask for the reports sent before we joined.
        self.sub_state = DataReader(self.participant, Topic(self.participant, "rt/policy_node/state", String),
                                    qos=Qos(Policy.Reliability.Reliable(duration(milliseconds=100)), Policy.History.KeepLast(100),
                                            Policy.Durability.TransientLocal))
        self.error: Exception | None = None
        """Why the driver thread died, if it did."""
        self._running = True
        self._thread = threading.Thread(target=self._run, name="cyclone_robot", daemon=True)
        self._thread.start()

    def _writer(self, topic: str, msg_type, qos: Qos) -> DataWriter:
        return DataWriter(self.participant, Topic(self.participant, topic, msg_type), qos=qos)

    # Inputs to the policy node.

    def estop(self, active: bool) -> None:
        self.pub_estop.write(Bool(data=active))

    def _publish(self) -> None:
        header = stamp_now()
        if self.publish_joints:
            pos = self.joint_pos.tolist()
            self.pub_joints.write(JointState(header=header, name=self.joint_names, position=pos,
                                             velocity=[0.0] * len(pos), effort=[]))
        for writer, value in ((self.pub_ee, self.ee_pos), (self.pub_target, self.ee_target)):
            writer.write(PointStamped(header=header, point=Point(*(float(v) for v in value))))

    # What the policy node sent.

    def _take(self) -> None:
        commands = [np.array(s.data) for s in self.sub_commands.take(N=100) if s.sample_info.valid_data]
        states = [json.loads(s.data) for s in self.sub_state.take(N=100) if s.sample_info.valid_data]
        now = time.monotonic()
        with self.lock:
            self.commands.extend((now, c) for c in commands)
            self.states.extend({**s, "received": now} for s in states)

    def state_names(self) -> list[str]:
        with self.lock:
            return [s["state"] for s in self.states]

    def wait_for_state(self, state: str, timeout: float, after: int = 0, reason: str | None = None) -> dict:
        """The first state report `state` (whose reason contains `reason`, if given) at index >= after."""
        deadline = time.monotonic() + timeout
        while True:
            with self.lock:
                for entry in self.states[after:]:
                    if entry["state"] == state and (reason is None or reason in entry["reason"]):
                        return entry
            if self.error is not None:
                raise RuntimeError("the Cyclone robot's thread failed") from self.error
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        with self.lock:
            seen = [(s["state"], s["reason"]) for s in self.states]
        raise TimeoutError(f"policy_node never reported '{state}' ({reason or 'any reason'}) in {timeout} s; it reported {seen}")

    # Life cycle.

    def _run(self) -> None:
        next_tick = time.monotonic()
        try:
            while self._running:
                self._publish()
                self._take()
                # After a stall (a busy machine) carry on at the rate; a burst of stale readings is no driver's habit.
                next_tick = max(next_tick + self.period_s, time.monotonic())
                time.sleep(max(0.0, next_tick - time.monotonic()))
        except Exception as err:  # kept for wait_for_state: a dead driver is not a silent node
            self.error = err
            raise

    def close(self) -> None:
        """Stop publishing and leave the domain (Cyclone deletes an entity when its Python object goes)."""
        self._running = False
        self._thread.join(timeout=5.0)
        for name in ("pub_joints", "pub_ee", "pub_target", "pub_estop", "sub_commands", "sub_state", "participant", "domain"):
            setattr(self, name, None)
