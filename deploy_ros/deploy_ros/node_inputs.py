# SPDX-License-Identifier: BSD-3-Clause
"""`policy_node`'s inputs: its subscriptions, and what each message does to the runtime (and the bag).

Design and contract notes: docs/modules/deploy_ros.node_inputs.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from geometry_msgs.msg import Twist
from rclpy.callback_groups import CallbackGroup
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool

from batonlab.deploy import InputError, JointMismatchError
from batonlab.deploy.manifest_robot import IMU_ANGULAR_VELOCITY, IMU_LINEAR_ACCELERATION, IMU_ORIENTATION
from deploy_ros.input_monitor import InputMonitor
from deploy_ros.messages import input_msg_type, msg_to_vector

INPUT_QOS = QoSProfile(history=HistoryPolicy.KEEP_LAST, depth=100, reliability=ReliabilityPolicy.BEST_EFFORT,
                       durability=DurabilityPolicy.VOLATILE)
"""Every input: matches RELIABLE and BEST_EFFORT, VOLATILE and TRANSIENT_LOCAL publishers; depth 100 keeps
every message of a control period even for kHz drivers that split joint states over several messages."""


IMU_FIELDS = {
    IMU_ORIENTATION: lambda m: (m.orientation.w, m.orientation.x, m.orientation.y, m.orientation.z),
    IMU_ANGULAR_VELOCITY: lambda m: (m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z),
    IMU_LINEAR_ACCELERATION: lambda m: (m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z),
}
"""Manifest sensor source → its reading in a sensor_msgs/Imu (REP-145; orientation as w, x, y, z)."""

IMU_ABSENT = {IMU_ORIENTATION: "orientation_covariance", IMU_ANGULAR_VELOCITY: "angular_velocity_covariance",
              IMU_LINEAR_ACCELERATION: "linear_acceleration_covariance"}
"""REP-145: an IMU without a field sets element 0 of its covariance to -1; such a reading is no reading."""


class TakenByTheControlStep(CallbackGroup):
    """Input subscriptions the executor never waits on: each control step takes their messages itself.

    Every input matters only at the next control step, so waking the executor for each message
    (hundreds per second from a 200 Hz robot) buys nothing and costs most of the node's CPU; at the
    step, the messages are taken in arrival order and each is aged by its DDS reception stamp.
    """

    def can_execute(self, entity) -> bool:
        """Never: the executor does not run these subscriptions' callbacks."""
        return False

    def beginning_execution(self, entity) -> bool:
        """Never: the executor does not start these subscriptions' callbacks."""
        return False

    def ending_execution(self, entity) -> None:
        """Do nothing: no callback of this group ever runs."""
        pass


class PolicyInputs:
    """The node's input subscriptions, feeding `runtime` (and `recorder`) when the control step takes them."""

    def __init__(self, node, p: dict, manifest, runtime, recorder, cmd_vel_command: str, twist_to_values,
                 now: Callable[[], float], log_ns: Callable[[], int], refuse: Callable[[str], None]):
        """Subscribe every input (declares `sensor_topics.<name>` and `task_command_topics.<name>` on `node`).

        Args:
            now: the control clock [s]; log_ns: the log time of recorded messages [ns];
            refuse: ends the node when the robot turns out to be another robot than the manifest's.
        """
        self.node, self.runtime, self.recorder = node, runtime, recorder
        self.cmd_vel_command, self._twist_to_values = cmd_vel_command, twist_to_values
        self._now, self._log_ns, self._refuse = now, log_ns, refuse
        self.use_sim_time = bool(node.get_parameter("use_sim_time").value)
        self.joint_stamp_ns = 0
        """Header stamp of the last joint_states [ns] (the input time of a recorded policy step)."""
        self.group = TakenByTheControlStep()
        self.monitor = InputMonitor(node)
        self._subscriptions = []
        self._subscribe("joint_states", JointState, p["joint_states_topic"], self._on_joint_states)
        self._subscribe("imu", Imu, p["imu_topic"], self._on_imu)
        self._subscribe("estop", Bool, p["estop_topic"], self._on_estop)
        self._subscribe("cmd_vel", Twist, p["cmd_vel_topic"], self._on_cmd_vel)
        if recorder.enabled:
            from nav_msgs.msg import Odometry

            # Recorded only: taken with the inputs, but not watched (the policy does not need it).
            sub = node.create_subscription(Odometry, p["odom_topic"], self._on_odom, INPUT_QOS, callback_group=self.group)
            self._subscriptions.append(sub)
        # Sensors the IMU carries come from the imu topic, the others from their own topics.
        self.imu_sensors = [(name, spec.source) for name, spec in manifest.sensors.items()
                            if spec.source in IMU_FIELDS and name in runtime.vectors]
        self._input_of = {name: "imu" for name, _ in self.imu_sensors}
        """Input (monitored topic) that carries each manifest input, where it is not the input's own."""
        self.input_topics = {name: p["imu_topic"] for name, _ in self.imu_sensors}
        for name, slot in runtime.vectors.items():
            if name == cmd_vel_command:
                self._input_of[name] = "cmd_vel"
                self.input_topics[name] = p["cmd_vel_topic"]
                continue
            if name in self._input_of:
                continue
            # Task-command topics are remapped with task_command_topics.<name>: command_topics.<interface> names outputs.
            group = "sensor_topics" if slot.kind == "sensor" else "task_command_topics"
            default = f"{'sensors' if slot.kind == 'sensor' else 'commands'}/{name}"
            topic = node.declare_parameter(f"{group}.{name}", default).value
            self._subscribe(name, input_msg_type(slot.dim, slot.pose), topic, self._vector_callback(name))
            self.input_topics[name] = topic
        self.imu_stamp: float | None = None
        self._imu_tick = 0
        self._imu_absent_reported: set[str] = set()
        self._imu_non_finite: set[str] = set()

    def take_waiting(self) -> None:
        """Handle every input message the middleware already holds, before a control step judges the inputs."""
        for sub in self._subscriptions:
            for _ in range(INPUT_QOS.depth):
                with sub.handle:
                    taken = sub.handle.take_message(sub.msg_type, sub.raw)
                if taken is None:
                    break
                sub.callback(*taken)

    def status(self, now: float) -> dict:
        """The IMU's age and the inputs the node cannot hear, for ~/state and diagnostics."""
        return {"imu_age_s": None if self.imu_stamp is None else now - self.imu_stamp,
                "ticks_since_imu": None if self.imu_stamp is None else int(self.runtime.tick - self._imu_tick),
                "input_problems": self.monitor.problems()}

    def describe_never_received(self, missing) -> str:
        """Each missing input, with the topic (and the publishers) it should come from."""
        return "; ".join((f"{name} from " if name in self._input_of else "")
                         + self.monitor.describe(self._input_of.get(name, name)) for name in missing)

    # Time.

    def _arrival(self, info) -> float:
        """When the middleware received a message, on the control clock [s].

        The DDS reception stamp (system clock) is mapped onto the steady clock through their current
        offset; a message that waited in the queue while this node was descheduled keeps its true age.
        """
        now = self._now()
        received = info.get("received_timestamp", 0) if isinstance(info, dict) else 0
        if self.use_sim_time or not received:
            return now
        waited = (time.time_ns() - received) * 1e-9
        return now - waited if 0.0 <= waited < 1.0 else now

    @staticmethod
    def _source_time(info) -> float | None:
        """When the publisher wrote a message (DDS source stamp, the publisher's system clock) [s]."""
        stamp = info.get("source_timestamp", 0) if isinstance(info, dict) else 0
        return stamp * 1e-9 if stamp else None

    # Messages.

    def _subscribe(self, name: str, msg_type, topic: str, callback) -> None:
        self.monitor.watch(name, topic, msg_type, INPUT_QOS)
        sub = self.node.create_subscription(msg_type, topic, callback, INPUT_QOS, callback_group=self.group)
        self._subscriptions.append(sub)

    def _on_joint_states(self, msg: JointState, info=None) -> None:
        # The reading's own time for the jump check: the header stamp (when the robot measured), else
        # when the publisher wrote it.
        measured_ns = stamp_ns(msg.header)
        try:
            accepted = self.runtime.set_joint_state(msg.name, msg.position, msg.velocity, self._arrival(info),
                                                    measured_ns * 1e-9 if measured_ns > 0 else self._source_time(info))
            if not accepted:
                self.node.get_logger().error(f"bad joint_states while commanding: {self.runtime.safety.reason}",
                                             throttle_duration_sec=1.0)
        except JointMismatchError as err:
            self._refuse(str(err))
            return
        except InputError as err:
            self.node.get_logger().warning(f"dropped joint_states: {err}", throttle_duration_sec=1.0)
        self.joint_stamp_ns = measured_ns
        self.recorder.joint_state(self._log_ns(), msg.position, msg.velocity, msg.effort, names=tuple(msg.name),
                                  header_ns=self.joint_stamp_ns)

    def _vector_callback(self, name: str):
        slot = self.runtime.vectors[name]
        if slot.kind == "command":
            record = self.recorder.task_command_pose if slot.pose else self.recorder.task_command
        else:
            record = self.recorder.sensor_pose if slot.pose else self.recorder.sensor
        rejected = "non-finite, or its quaternion off unit length" if slot.pose else "non-finite"

        def callback(msg, info=None) -> None:
            values = msg_to_vector(msg)
            try:
                if not self.runtime.set_vector(name, values, self._arrival(info)):
                    self.node.get_logger().warning(f"rejected {name}: {rejected}", throttle_duration_sec=1.0)
            except InputError as err:
                self.node.get_logger().warning(f"dropped {name}: {err}", throttle_duration_sec=1.0)
            header = getattr(msg, "header", None)
            record(name, self._log_ns(), values, frame_id=header.frame_id if header is not None else "",
                   header_ns=stamp_ns(header) if header is not None else None)
        return callback

    def _on_cmd_vel(self, msg: Twist, info=None) -> None:
        self.recorder.twist(self._log_ns(), (msg.linear.x, msg.linear.y, msg.linear.z),
                            (msg.angular.x, msg.angular.y, msg.angular.z))
        if not self.cmd_vel_command:
            return
        if not self.runtime.set_vector(self.cmd_vel_command, self._twist_to_values(msg), self._arrival(info)):
            self.node.get_logger().warning("rejected non-finite cmd_vel", throttle_duration_sec=1.0)

    def _on_imu(self, msg: Imu, info=None) -> None:
        arrival = self._arrival(info)
        self.imu_stamp, self._imu_tick = arrival, self.runtime.tick
        for name, source in self.imu_sensors:
            if getattr(msg, IMU_ABSENT[source])[0] == -1.0:
                # Not a reading: the sensor goes stale (a commanding robot stops) or is never received (no start).
                if name not in self._imu_absent_reported:
                    self._imu_absent_reported.add(name)
                    self.node.get_logger().error(f"the IMU sends no {source.split('.')[1]} ({IMU_ABSENT[source]}[0] = -1, "
                                                 f"REP-145), which the policy reads as '{name}'")
                continue
            values = IMU_FIELDS[source](msg)
            self.runtime.set_vector(name, values, arrival)  # non-finite: stored, and the next step stops
            finite = bool(np.isfinite(values).all())
            if not finite and name not in self._imu_non_finite:  # logged once per episode of bad readings
                self.node.get_logger().error(f"non-finite imu {source.split('.')[1]} {list(values)} ({name})")
            (self._imu_non_finite.discard if finite else self._imu_non_finite.add)(name)
        o, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
        self.recorder.imu(self._log_ns(), (o.w, o.x, o.y, o.z), (w.x, w.y, w.z), (a.x, a.y, a.z),
                          frame_id=msg.header.frame_id, header_ns=stamp_ns(msg.header))

    def _on_odom(self, msg, info=None) -> None:
        pose, twist = msg.pose.pose, msg.twist.twist
        p, o, v, w = pose.position, pose.orientation, twist.linear, twist.angular
        self.recorder.odom(self._log_ns(), (p.x, p.y, p.z), (o.w, o.x, o.y, o.z), (v.x, v.y, v.z), (w.x, w.y, w.z),
                           frame_id=msg.header.frame_id or "odom", child_frame_id=msg.child_frame_id,
                           header_ns=stamp_ns(msg.header))

    def _on_estop(self, msg: Bool, info=None) -> None:
        self.runtime.set_estop(bool(msg.data), self._arrival(info))


def stamp_ns(header) -> int:
    """A message header's stamp [ns]."""
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)
