# SPDX-License-Identifier: BSD-3-Clause
"""`policy_node`: a batonlab policy as a ROS 2 node, a thin layer over `batonlab.deploy.DeployRuntime`.

Subscribes:  joint_states (sensor_msgs/JointState; the joints may be split over several messages),
             imu (sensor_msgs/Imu: feeds the manifest's sensors whose source is an IMU field, e.g. the
             wheel-legged robot's imu_quat ← orientation (w, x, y, z) and imu_gyro ← angular_velocity),
             cmd_vel (geometry_msgs/Twist), estop (std_msgs/Bool: true stops; in heartbeat mode false
             must keep arriving), sensors/<name> and commands/<name> for the other inputs the manifest
             names (see `deploy_ros.messages`), and, when recording, odom (nav_msgs/Odometry: recorded
             only, never an input of the policy).
Publishes:   joint commands as std_msgs/Float64MultiArray for ros2_control's forward controllers
             (and/or trajectory_msgs/JointTrajectory), ~/state (std_msgs/String, JSON, latched: one per
             state transition, per change of the stop phase, of the waiting reason and of input
             problems) and diagnostics (diagnostic_msgs/DiagnosticArray: the node, and its inputs).
Services:    ~/reset (leave stop; refused while the e-stop is on), ~/start (when auto_start is off;
             refused, naming the input, while a required input never arrived or is faulty).
Recording:   with `record:=true`, a rosbag2 (MCAP) bag in `record_dir` holds the received inputs, every
             policy step (observation, raw and filtered action, safety state) and the commands sent
             (`batonlab.deploy.recording`). A separate writer process serialises and writes; if writing
             fails (disk full) the node logs it, reports it in diagnostics and keeps controlling.

Commands. The command vector holds the policy's joints, then the joints the manifest holds (a stowed
arm on a base-only policy), each with its interface: "position", "velocity" (wheels [rad/s]) or
"effort". A robot with one interface gets one Float64MultiArray on `command_topic`, in
`command_joint_order`. A robot with several gets one per interface I on `command_topics.I` (default
`<command_topic>/I`: joint_commands/position, joint_commands/velocity), in `command_joint_orders.I`
(default: I's joints in command-vector order); on a robot these are ros2_control forward controllers
(/forward_position_controller/commands, /forward_velocity_controller/commands). sim_robot_node takes
the same scheme. A JointTrajectory carries positions only: `output` trajectory or both refuses a
policy with velocity or effort joints.

cmd_vel. Its Twist maps onto a manifest command by field name (lin_vel_x ← linear.x, lin_vel_y ←
linear.y, ang_vel_z ← angular.z, …, `deploy_ros.messages.twist_to_command`); fields a Twist cannot
carry (a base height) keep the command's default, and so does the whole command `cmd_vel_timeout_s`
after the last Twist. `cmd_vel_command` "auto" picks the one command with a lin_vel_x field.

QoS. Every input is subscribed BEST_EFFORT + VOLATILE, which matches publishers of any reliability
and durability: an e-stop published RELIABLE or BEST_EFFORT is heard either way. Publishers the
node cannot hear (another message type, incompatible QoS) are named on ~/state and /diagnostics.
Outputs are RELIABLE (commands, depth 1) and RELIABLE + TRANSIENT_LOCAL (~/state), which any
subscriber matches.

Timing. Input callbacks do not run on their own: the input subscriptions sit in a callback group
that the executor never waits on (`TakenByTheControlStep`), and each control step begins by taking
every message the middleware holds for them, in arrival order. An input's age is measured from the
moment the middleware received it (DDS reception stamp, mapped onto the steady clock), not from
when Python got around to it, so a node that was itself descheduled does not blame the robot for
its own delay, and a burst of input messages can never delay or starve a control step. (Measured
on 2 cores against the 200 Hz simulator: 27 % CPU with per-message callbacks on one thread, 48 %
with input and control callback groups on a two-thread executor.) The step's own lateness and
loop overruns are reported in diagnostics. With `use_sim_time:=true` (sim-to-sim) control steps
and ages follow the simulator's /clock.

Only batonlab.deploy, rclpy and message packages are imported: no torch, no mujoco.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from pathlib import Path

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Twist
from rclpy.callback_groups import CallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from batonlab.deploy import (DeployRuntime, InputError, JointMismatchError, ManifestError, PlausibilityCfg, SafetyCfg, State,
                             load_manifest)
from batonlab.deploy.actions import POSITION
from batonlab.deploy.manifest_robot import IMU_ANGULAR_VELOCITY, IMU_LINEAR_ACCELERATION, IMU_ORIENTATION
from batonlab.deploy.timing import LoopTiming, use_realtime_priority
from deploy_ros.input_monitor import InputMonitor
from deploy_ros.messages import TWIST_FIELDS, float_array, msg_to_vector, twist_to_command, twist_to_vector, vector_msg_type

PARAMETERS = {
    "manifest": "",  # manifest.json or the export folder holding it and policy.onnx
    "verify_hash": True,  # check policy.onnx against the manifest's sha256
    "control_rate_hz": 0.0,  # 0: the manifest's control rate
    "joint_states_topic": "joint_states",
    "imu_topic": "imu",
    "cmd_vel_topic": "cmd_vel",
    "estop_topic": "estop",
    "odom_topic": "odom",  # nav_msgs/Odometry, recorded with record:=true (not a policy input)
    "command_topic": "joint_commands",  # one interface: its topic (e.g. /forward_position_controller/commands);
    # several: the prefix of the defaults of command_topics.<interface> (declared per interface)
    "trajectory_topic": "joint_trajectory",  # e.g. /joint_trajectory_controller/joint_trajectory
    "output": "forward",  # forward (Float64MultiArray) | trajectory (JointTrajectory, position joints only) | both
    "command_joint_order": [""],  # one interface: joint order of the forward controller; empty: the command vector's
    # (several interfaces: command_joint_orders.<interface>, declared per interface)
    "ignored_joints": [""],  # robot joints the policy does not use (gripper, head …)
    "cmd_vel_command": "auto",  # manifest command fed by cmd_vel; auto: the one with a lin_vel_x field; "": none
    "cmd_vel_timeout_s": 0.5,  # cmd_vel falls back to the command's default after this
    "ramp_time_s": 2.0,
    "stale_timeout_s": 0.0,  # 0: two control periods, at least 25 ms
    "max_joint_velocity": 3.0,  # rate limit of position targets [rad/s]
    "max_velocity_command": 0.0,  # velocity targets within ± this [rad/s]; 0: the manifest's control range alone
    "max_acceleration": 400.0,  # velocity targets change at most this fast while running [rad/s²]
    "stop_deceleration": 20.0,  # stopped: velocity targets ramp to zero at this rate [rad/s²]
    "position_margin": 0.0,
    "torque_limit_scale": 1.0,
    "stop_behavior": "",  # hold_then_damp | hold | damp | crouch; "": the robot's (the manifest's stop)
    "stop_time_s": 0.0,  # crouch: time to reach the stop pose [s]; 0: the manifest's
    # stop_pose.<joint>: crouch target of a position joint [rad or m], over the manifest's stop pose (declared per joint)
    "stop_hold_time_s": 3.0,
    "stop_hold_torque_scale": 0.5,
    "estop_mode": "latch",  # latch (true stops) | heartbeat (stop unless false arrives every estop_heartbeat_timeout_s)
    "estop_heartbeat_timeout_s": 0.2,
    "sensor_range_tolerance": 0.1,  # joint readings this far outside their limits are sensor faults [rad or m]
    "sensor_max_joint_speed": 50.0,  # faster readings (or jumps implying more) are sensor faults [rad/s or m/s]
    "sensor_jump_tolerance": 0.05,
    "velocity_from_positions": False,  # estimate joint velocities by finite differences if the robot sends none
    "input_rate_samples": 8,  # input gaps measured before a start (0: no input-rate check)
    "auto_start": True,
    "diagnostics_rate_hz": 2.0,
    "graph_check_rate_hz": 1.0,  # how often publishers on the input topics are checked
    "realtime_priority": 0,  # 1-99: run the node's threads under SCHED_FIFO at this priority (0: normal scheduling)
    "record": False,  # write a rosbag2 (MCAP) bag of inputs, policy steps and commands
    "record_dir": "bags",  # bags go to <record_dir>/<task>_<date-time>
    "record_robot": "",  # robot name stored in the bag's metadata
    "record_seed": -1,  # seed stored in the bag's metadata (sim-to-sim episodes); -1: none
}
"""Parameters and their defaults (config/policy_node.yaml documents them for a robot)."""

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


class RefusedToStart(RuntimeError):
    """The node cannot run this policy on this robot (bad manifest, joint mismatch, bad output configuration)."""


class TakenByTheControlStep(CallbackGroup):
    """Input subscriptions the executor never waits on: each control step takes their messages itself.

    Every input matters only at the next control step, so waking the executor for each message
    (hundreds per second from a 200 Hz robot) buys nothing and costs most of the node's CPU; at the
    step, the messages are taken in arrival order and each is aged by its DDS reception stamp.
    """

    def can_execute(self, entity) -> bool:
        return False

    def beginning_execution(self, entity) -> bool:
        return False

    def ending_execution(self, entity) -> None:
        pass


class PolicyNode(Node):
    def __init__(self, **kwargs):
        super().__init__("policy_node", **kwargs)
        p = {name: self.declare_parameter(name, default).value for name, default in PARAMETERS.items()}
        for key in ("command_joint_order", "ignored_joints"):
            p[key] = [s for s in p[key] if s]
        self.params = p
        try:
            manifest = load_manifest(p["manifest"], verify_hash=p["verify_hash"])
        except ManifestError as err:
            raise RefusedToStart(str(err)) from None
        if p["estop_mode"] not in ("latch", "heartbeat"):
            raise RefusedToStart(f"estop_mode must be 'latch' or 'heartbeat', got '{p['estop_mode']}'")
        try:
            safety = SafetyCfg(
                ramp_time_s=p["ramp_time_s"], stale_timeout_s=p["stale_timeout_s"] or None,
                max_joint_velocity=p["max_joint_velocity"], max_velocity_command=p["max_velocity_command"] or None,
                max_acceleration=p["max_acceleration"], stop_deceleration=p["stop_deceleration"],
                position_margin=p["position_margin"], torque_limit_scale=p["torque_limit_scale"],
                stop_behavior=p["stop_behavior"] or None, stop_pose=self._stop_pose(manifest),
                stop_time_s=p["stop_time_s"] or None,
                stop_hold_time_s=p["stop_hold_time_s"], stop_hold_torque_scale=p["stop_hold_torque_scale"],
                auto_start=p["auto_start"],
                estop_heartbeat_timeout_s=p["estop_heartbeat_timeout_s"] if p["estop_mode"] == "heartbeat" else None,
                plausibility=PlausibilityCfg(p["sensor_range_tolerance"], p["sensor_max_joint_speed"], p["sensor_jump_tolerance"]),
                velocity_from_positions=p["velocity_from_positions"], input_rate_samples=p["input_rate_samples"],
            )
        except ValueError as err:
            raise RefusedToStart(str(err)) from None
        self.cmd_vel_command, self._twist_to_values, default = _cmd_vel_command(manifest, p["cmd_vel_command"])
        cmd_vel_command = self.cmd_vel_command
        defaults = {cmd_vel_command: default} if cmd_vel_command else {}
        timeouts = {cmd_vel_command: p["cmd_vel_timeout_s"]} if cmd_vel_command else {}
        rate = p["control_rate_hz"] or manifest.control_rate_hz
        self.period_s = 1.0 / rate
        if abs(rate - manifest.control_rate_hz) > 1e-6:
            self.get_logger().warning(f"control_rate_hz {rate:g} differs from the {manifest.control_rate_hz:g} Hz the policy "
                                      "was trained at: for tests and benchmarks only")
        try:
            self.runtime = DeployRuntime(manifest, safety, p["ignored_joints"], defaults, timeouts,
                                         on_transition=self._on_transition, control_dt=self.period_s)
        except (ManifestError, ValueError) as err:
            raise RefusedToStart(str(err)) from None
        self.manifest = manifest
        self.outputs = self._command_outputs(p)
        """(interface, topic, joint order) of each Float64MultiArray the node publishes."""
        names = list(self.runtime.joint_names)
        self._out_idx = [np.array([names.index(n) for n in order]) for _, _, order in self.outputs]
        if p["output"] in ("trajectory", "both") and set(self.runtime.command_kinds) != {POSITION}:
            others = [n for n, k in zip(names, self.runtime.command_kinds) if k != POSITION]
            raise RefusedToStart(f"output '{p['output']}' sends positions only (trajectory_msgs/JointTrajectory), but the "
                                 f"policy commands {others} by velocity or effort: use output:=forward")
        # The recorded joint_commands vector: the one output's order, else the command vector's.
        self.command_joint_order = self.outputs[0][2] if len(self.outputs) == 1 else names
        self._record_idx = np.array([names.index(n) for n in self.command_joint_order])
        # The control clock: steady wall time on a robot; the simulator's /clock with use_sim_time.
        self.use_sim_time = bool(self.get_parameter("use_sim_time").value)
        self.control_clock = self.get_clock() if self.use_sim_time else Clock(clock_type=ClockType.STEADY_TIME)
        logging.getLogger("batonlab.deploy").addHandler(logging.NullHandler())  # transitions are logged here
        self.refused = Future()
        """Done (with the reason) when the robot turns out to be another robot than the manifest's."""
        self.timing = LoopTiming(self.period_s)
        self._reported_reason = ""

        # Recording (before the subscriptions, whose callbacks record).
        self._joint_stamp_ns = 0
        self.recorder = self._open_recorder(p) if p["record"] else None
        self._record_failure_reported = False

        # Publishers.
        reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        if p["output"] not in ("forward", "trajectory", "both"):
            raise RefusedToStart(f"output must be forward, trajectory or both, got '{p['output']}'")
        self.pub_forward = ([self.create_publisher(Float64MultiArray, topic, reliable) for _, topic, _ in self.outputs]
                            if p["output"] in ("forward", "both") else [])
        self.pub_trajectory = (self.create_publisher(JointTrajectory, p["trajectory_topic"], reliable)
                               if p["output"] in ("trajectory", "both") else None)
        self.pub_state = self.create_publisher(String, "~/state", latched)
        self.pub_diagnostics = self.create_publisher(DiagnosticArray, "diagnostics", 10)

        # Subscriptions: taken by the control step, never run by the executor.
        self.input_group = TakenByTheControlStep()
        self.monitor = InputMonitor(self)
        self._input_subscriptions = []
        self._subscribe("joint_states", JointState, p["joint_states_topic"], self._on_joint_states)
        self._subscribe("imu", Imu, p["imu_topic"], self._on_imu)
        self._subscribe("estop", Bool, p["estop_topic"], self._on_estop)
        self._subscribe("cmd_vel", Twist, p["cmd_vel_topic"], self._on_cmd_vel)
        if self.recorder is not None:
            from nav_msgs.msg import Odometry

            # Recorded only: taken with the inputs, but not watched (the policy does not need it).
            sub = self.create_subscription(Odometry, p["odom_topic"], self._on_odom, INPUT_QOS, callback_group=self.input_group)
            self._input_subscriptions.append(sub)
        # Sensors the IMU carries come from the imu topic, the others from their own topics.
        self.imu_sensors = [(name, spec.source) for name, spec in manifest.sensors.items()
                            if spec.source in IMU_FIELDS and name in self.runtime.vectors]
        self._input_of = {name: "imu" for name, _ in self.imu_sensors}
        """Input (monitored topic) that carries each manifest input, where it is not the input's own."""
        self.input_topics = {name: p["imu_topic"] for name, _ in self.imu_sensors}
        for name, slot in self.runtime.vectors.items():
            if name == cmd_vel_command:
                self._input_of[name] = "cmd_vel"
                self.input_topics[name] = p["cmd_vel_topic"]
                continue
            if name in self._input_of:
                continue
            # Task-command topics are remapped with task_command_topics.<name>: command_topics.<interface> names outputs.
            group = "sensor_topics" if slot.kind == "sensor" else "task_command_topics"
            default = f"{'sensors' if slot.kind == 'sensor' else 'commands'}/{name}"
            topic = self.declare_parameter(f"{group}.{name}", default).value
            self._subscribe(name, vector_msg_type(slot.dim), topic, self._vector_callback(name))
            self.input_topics[name] = topic
        self.imu_stamp: float | None = None
        self._imu_tick = 0
        self._imu_absent_reported: set[str] = set()
        self._imu_non_finite: set[str] = set()
        self._stop_phase: str | None = None
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(Trigger, "~/start", self._on_start)

        self._next_diagnostics = 0.0
        self.create_timer(1.0 / max(p["graph_check_rate_hz"], 1e-3), self._check_graph)
        self.timer = self.create_timer(self.period_s, self._on_timer, clock=self.control_clock)
        outputs = "; ".join(f"{kind} {order} on {topic}" for kind, topic, order in self.outputs) if self.pub_forward else ""
        if self.pub_trajectory is not None:
            outputs += ("; " if outputs else "") + f"trajectory on {p['trajectory_topic']}"
        stop = self.runtime.safety_cfg
        self.get_logger().info(
            f"policy '{manifest.task}' ({manifest.onnx_path}) at {rate:.1f} Hz; joints {list(manifest.joint_names)}"
            + (f", held {list(manifest.held_joints.names)}" if manifest.held_joints.names else "") + "; "
            f"inputs {dict(joint_states=p['joint_states_topic'], **self.input_topics)}; output {p['output']}: {outputs}; "
            f"stale timeout {self.runtime.stale_timeout_s * 1e3:.0f} ms; stop behaviour {stop.stop_behavior}"
            + (f" to {stop.stop_pose} in {stop.stop_time_s:g} s" if stop.stop_behavior == "crouch" else "")
            + f"; e-stop {p['estop_mode']}"
        )
        self._publish_state("passive", "waiting for inputs")

    # Configuration.

    def _stop_pose(self, manifest) -> dict[str, float] | None:
        """The crouch pose: the manifest's, with the joints set by `stop_pose.<joint>` parameters; None: the manifest's."""
        from rcl_interfaces.msg import ParameterDescriptor

        joints = (*manifest.joint_names, *manifest.held_joints.names)
        overrides = {}
        for name in joints:
            value = self.declare_parameter(f"stop_pose.{name}", float("nan"), ParameterDescriptor(dynamic_typing=True)).value
            if value is not None and np.isfinite(float(value)):
                overrides[name] = float(value)
        # A misspelt joint would be ignored silently by ROS (undeclared parameter): a safety setting must not be.
        unknown = sorted(k[len("stop_pose."):] for k in self._parameter_overrides
                         if k.startswith("stop_pose.") and k[len("stop_pose."):] not in joints)
        if unknown:
            raise RefusedToStart(f"stop_pose names joints {unknown} that the node does not command {list(joints)}")
        return {**manifest.stop.pose, **overrides} if overrides else None

    def _command_outputs(self, p: dict) -> list[tuple[str, str, list[str]]]:
        """(interface, topic, joint order) per command message (see the module docstring)."""
        interfaces: dict[str, list[str]] = {}
        for name, kind in zip(self.runtime.joint_names, self.runtime.command_kinds):
            interfaces.setdefault(kind, []).append(name)
        if len(interfaces) == 1:
            (kind, joints), = interfaces.items()
            order = p["command_joint_order"] or joints
            if sorted(order) != sorted(joints):
                raise RefusedToStart(f"command_joint_order {order} must be a permutation of the commanded joints {joints}")
            return [(kind, p["command_topic"], order)]
        if p["command_joint_order"]:
            raise RefusedToStart(f"the policy commands several interfaces {list(interfaces)}: set command_joint_orders."
                                 "<interface> instead of command_joint_order")
        outputs = []
        for kind, joints in interfaces.items():
            topic = self.declare_parameter(f"command_topics.{kind}", f"{p['command_topic']}/{kind}").value
            order = [s for s in self.declare_parameter(f"command_joint_orders.{kind}", [""]).value if s] or joints
            if sorted(order) != sorted(joints):
                raise RefusedToStart(f"command_joint_orders.{kind} {order} must be a permutation of the {kind} joints {joints}")
            outputs.append((kind, topic, order))
        return outputs

    # Time.

    def _now(self) -> float:
        """Control-clock time [s]: input ages, ramp and watchdog are measured on it."""
        return self.control_clock.now().nanoseconds * 1e-9

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

    def _log_ns(self) -> int:
        """Log time of recorded messages: the node's ROS clock (the simulator's /clock with use_sim_time) [ns]."""
        return self.get_clock().now().nanoseconds

    # Recording.

    def _open_recorder(self, p: dict):
        """A `BagRecorder` in `record_dir`, or None (logged) if the bag cannot be created: the policy runs anyway."""
        from batonlab.deploy.manifest import sha256_file
        from batonlab.deploy.recording import BagRecorder, RecorderError

        manifest_file = Path(p["manifest"])
        manifest_file = manifest_file / "manifest.json" if manifest_file.is_dir() else manifest_file
        raw = {k: v for k, v in self.manifest.to_json().items() if k != "training_config"}
        metadata = {
            "source": "policy_node", "task": self.manifest.task, "robot": p["record_robot"] or None,
            "seed": p["record_seed"] if p["record_seed"] >= 0 else None,
            "manifest_sha256": sha256_file(manifest_file), "manifest_source": "export",
            "export_dir": str(manifest_file.parent.resolve()), "manifest": raw,
            "control_dt": self.period_s, "use_sim_time": self.use_sim_time,
        }
        topics = {"joint_states": self.resolve_topic_name(p["joint_states_topic"]), "imu": self.resolve_topic_name(p["imu_topic"]),
                  "odom": self.resolve_topic_name(p["odom_topic"]), "cmd_vel": self.resolve_topic_name(p["cmd_vel_topic"]),
                  "joint_commands": self.resolve_topic_name(p["command_topic"])}
        path = Path(p["record_dir"]) / f"{self.manifest.task}_{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            recorder = BagRecorder(path, metadata, self.manifest.joint_names, self.command_joint_order, topics)
        except RecorderError as err:
            self.get_logger().error(f"recording disabled: {err}; the policy runs without it")
            return None
        self.get_logger().info(f"recording to {path}")
        return recorder

    def _check_recorder(self) -> None:
        if not self._record_failure_reported and not self.recorder.ok:
            self._record_failure_reported = True
            self.get_logger().error(f"recording to {self.recorder.path} stopped: {self.recorder.error}; "
                                    "the policy keeps running without it")
            self._publish_diagnostics(self._now())

    def destroy_node(self):
        if getattr(self, "recorder", None) is not None:
            status, self.recorder = self.recorder.close(), None
            print(f"[policy_node] recording closed: {status['recording']}, {status['recording_written']} messages, "
                  f"{status['recording_dropped']} dropped, error: {status['recording_error']}", file=sys.stderr, flush=True)
        return super().destroy_node()

    # Inputs.

    def _subscribe(self, name: str, msg_type, topic: str, callback) -> None:
        self.monitor.watch(name, topic, msg_type, INPUT_QOS)
        sub = self.create_subscription(msg_type, topic, callback, INPUT_QOS, callback_group=self.input_group)
        self._input_subscriptions.append(sub)

    def _take_waiting_inputs(self) -> None:
        """Handle every input message the middleware already holds, before a control step judges the inputs."""
        for sub in self._input_subscriptions:
            for _ in range(INPUT_QOS.depth):
                with sub.handle:
                    taken = sub.handle.take_message(sub.msg_type, sub.raw)
                if taken is None:
                    break
                sub.callback(*taken)

    def _on_joint_states(self, msg: JointState, info=None) -> None:
        # The reading's own time for the jump check: the header stamp (when the robot measured), else
        # when the publisher wrote it.
        measured_ns = _stamp_ns(msg.header)
        try:
            accepted = self.runtime.set_joint_state(msg.name, msg.position, msg.velocity, self._arrival(info),
                                                    measured_ns * 1e-9 if measured_ns > 0 else self._source_time(info))
            if not accepted:
                self.get_logger().error(f"bad joint_states while commanding: {self.runtime.safety.reason}",
                                        throttle_duration_sec=1.0)
        except JointMismatchError as err:
            self._refuse(str(err))
            return
        except InputError as err:
            self.get_logger().warning(f"dropped joint_states: {err}", throttle_duration_sec=1.0)
        self._joint_stamp_ns = measured_ns
        if self.recorder is not None:
            self.recorder.joint_state(self._log_ns(), msg.position, msg.velocity, msg.effort, names=tuple(msg.name),
                                      header_ns=self._joint_stamp_ns)

    def _vector_callback(self, name: str):
        record = None
        if self.recorder is not None:
            record = self.recorder.sensor if self.runtime.vectors[name].kind == "sensor" else self.recorder.task_command

        def callback(msg, info=None) -> None:
            values = msg_to_vector(msg)
            try:
                if not self.runtime.set_vector(name, values, self._arrival(info)):
                    self.get_logger().warning(f"rejected non-finite {name}", throttle_duration_sec=1.0)
            except InputError as err:
                self.get_logger().warning(f"dropped {name}: {err}", throttle_duration_sec=1.0)
            if record is not None:
                header = getattr(msg, "header", None)
                record(name, self._log_ns(), values, header_ns=_stamp_ns(header) if header is not None else None)
        return callback

    def _on_cmd_vel(self, msg: Twist, info=None) -> None:
        if self.recorder is not None:
            self.recorder.twist(self._log_ns(), (msg.linear.x, msg.linear.y, msg.linear.z),
                                (msg.angular.x, msg.angular.y, msg.angular.z))
        if not self.cmd_vel_command:
            return
        if not self.runtime.set_vector(self.cmd_vel_command, self._twist_to_values(msg), self._arrival(info)):
            self.get_logger().warning("rejected non-finite cmd_vel", throttle_duration_sec=1.0)

    def _on_imu(self, msg: Imu, info=None) -> None:
        arrival = self._arrival(info)
        self.imu_stamp, self._imu_tick = arrival, self.runtime.tick
        for name, source in self.imu_sensors:
            if getattr(msg, IMU_ABSENT[source])[0] == -1.0:
                # Not a reading: the sensor goes stale (a commanding robot stops) or is never received (no start).
                if name not in self._imu_absent_reported:
                    self._imu_absent_reported.add(name)
                    self.get_logger().error(f"the IMU sends no {source.split('.')[1]} ({IMU_ABSENT[source]}[0] = -1, "
                                            f"REP-145), which the policy reads as '{name}'")
                continue
            values = IMU_FIELDS[source](msg)
            self.runtime.set_vector(name, values, arrival)  # non-finite: stored, and the next step stops
            finite = bool(np.isfinite(values).all())
            if not finite and name not in self._imu_non_finite:  # logged once per episode of bad readings
                self.get_logger().error(f"non-finite imu {source.split('.')[1]} {list(values)} ({name})")
            (self._imu_non_finite.discard if finite else self._imu_non_finite.add)(name)
        if self.recorder is not None:
            o, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
            self.recorder.imu(self._log_ns(), (o.w, o.x, o.y, o.z), (w.x, w.y, w.z), (a.x, a.y, a.z),
                              frame_id=msg.header.frame_id, header_ns=_stamp_ns(msg.header))

    def _on_odom(self, msg, info=None) -> None:
        pose, twist = msg.pose.pose, msg.twist.twist
        p, o, v, w = pose.position, pose.orientation, twist.linear, twist.angular
        self.recorder.odom(self._log_ns(), (p.x, p.y, p.z), (o.w, o.x, o.y, o.z), (v.x, v.y, v.z), (w.x, w.y, w.z),
                           frame_id=msg.header.frame_id or "odom", child_frame_id=msg.child_frame_id,
                           header_ns=_stamp_ns(msg.header))

    def _on_estop(self, msg: Bool, info=None) -> None:
        self.runtime.set_estop(bool(msg.data), self._arrival(info))

    def _refuse(self, reason: str) -> None:
        """The robot is not the manifest's robot and nothing was commanded yet: end the node (exit code 2)."""
        if not self.refused.done():
            self.get_logger().error(f"refusing to start: {reason}")
            self.refused.set_result(reason)

    # Services.

    def _on_reset(self, request, response):
        response.success, response.message = self.runtime.reset(self._now())
        return response

    def _on_start(self, request, response):
        self._take_waiting_inputs()
        response.success, response.message = self.runtime.start(self._now())
        missing = self.runtime.never_received()
        if missing:
            response.message += "; never received: " + "; ".join(
                (f"{name} from " if name in self._input_of else "") + self.monitor.describe(self._input_of.get(name, name))
                for name in missing)
        if not response.success:
            self.get_logger().warning(f"~/start refused: {response.message}")
        return response

    # The control step.

    def _on_timer(self) -> None:
        self._take_waiting_inputs()
        now = self._now()
        late_s = self.timing.tick(now)
        start = time.perf_counter()
        result = self.runtime.step(now)
        if result.command is not None:
            self._publish_command(result.command)
        compute_s = time.perf_counter() - start
        self.timing.done(compute_s)
        if self.recorder is not None:
            self._record_step(result, compute_s)
        if result.state is State.PASSIVE:
            self._report_waiting(result.reason)
        phase = self.runtime.safety.stop_phase(now)
        if phase != self._stop_phase:
            if phase is not None and self._stop_phase is not None:  # within a stop (entering it is a transition)
                self.get_logger().info(f"stop: {self._stop_phase} -> {phase}")
                self._publish_state(State.STOP.value, self.runtime.safety.reason)
            self._stop_phase = phase
        if late_s > 0.5 * self.period_s:
            self.get_logger().warning(f"control loop overrun: this step came {late_s * 1e3:.0f} ms late "
                                      f"({self.timing.overruns} overruns so far)", throttle_duration_sec=5.0)
        if now >= self._next_diagnostics:
            self._next_diagnostics = now + 1.0 / max(self.params["diagnostics_rate_hz"], 1e-3)
            self._publish_diagnostics(now)

    def _report_waiting(self, reason: str) -> None:
        """Log and publish why a passive robot does not start, each time the reason (numbers aside) changes."""
        key = re.sub(r"[-+]?\d[\d.e+-]*", "#", reason)
        if key != self._reported_reason:
            self._reported_reason = key
            if reason.startswith(("waiting for start", "measuring")):
                self.get_logger().info(f"passive: {reason}")
            else:
                self.get_logger().warning(f"passive: {reason}")
            self._publish_state(State.PASSIVE.value, reason)

    def _check_graph(self) -> None:
        if self.monitor.check():
            for problem in self.monitor.problems():
                self.get_logger().error(f"input not heard: {problem}")
            self._publish_state(self.runtime.state.value, self.runtime.safety.reason)
            self._publish_diagnostics(self._now())

    def _record_step(self, result, compute_time_s: float) -> None:
        """The step's observation, raw action and filtered command (enqueued; written by the recorder's thread)."""
        stamp = self._log_ns()
        ran = result.raw_action is not None
        if result.command is not None:
            self.recorder.joint_command(stamp, result.command[self._record_idx])
        self.recorder.policy_step(stamp, result.tick, self.runtime.observation.obs if ran else (), result.raw_action,
                                  result.command, result.state.value, result.reason, input_ns=self._joint_stamp_ns,
                                  compute_time_s=compute_time_s)
        self._check_recorder()

    def _on_transition(self, transition) -> None:
        text = f"{transition.source.value} -> {transition.target.value}: {transition.reason}"
        if transition.target is State.STOP:
            self.get_logger().warning(text)
        else:
            self.get_logger().info(text)
        self._reported_reason = ""
        self._publish_state(transition.target.value, transition.reason)
        self._publish_diagnostics(self._now())

    # Publishing.

    def _publish_command(self, command: np.ndarray) -> None:
        """The command vector (`runtime.joint_names` order) as one message per interface (and/or a trajectory)."""
        for pub, idx in zip(self.pub_forward, self._out_idx):
            pub.publish(float_array(command[idx]))
        if self.pub_trajectory is not None:  # a single, position interface
            msg = JointTrajectory()
            msg.joint_names = list(self.outputs[0][2])
            point = JointTrajectoryPoint()
            point.positions = command[self._out_idx[0]].tolist()
            point.time_from_start.nanosec = int(self.period_s * 1e9)
            msg.points = [point]
            self.pub_trajectory.publish(msg)

    def _status(self, now: float) -> dict:
        status = self.runtime.status(now)
        status["tick_late_s"] = self.timing.late_s
        status["imu_age_s"] = None if self.imu_stamp is None else now - self.imu_stamp
        status["ticks_since_imu"] = None if self.imu_stamp is None else int(self.runtime.tick - self._imu_tick)
        status["input_problems"] = self.monitor.problems()
        return status

    def _publish_state(self, state: str, reason: str) -> None:
        status = self._status(self._now())
        status.update(state=state, reason=reason, inputs=self.monitor.report())
        self.pub_state.publish(String(data=json.dumps(status)))

    def _publish_diagnostics(self, now: float) -> None:
        status = self._status(now)
        status.update(self.timing.stats())
        if getattr(self, "recorder", None) is not None:
            status.update(self.recorder.status())
        state = self.runtime.state
        level = {State.RUN: DiagnosticStatus.OK, State.STOP: DiagnosticStatus.ERROR}.get(state, DiagnosticStatus.WARN)
        message = f"{state.value}: {self.runtime.safety.reason}"
        if getattr(self, "recorder", None) is not None and not self.recorder.ok:
            message += f"; recording stopped: {self.recorder.error}"
        node = DiagnosticStatus(level=level, name=f"{self.get_name()}: {self.manifest.task}", hardware_id="batonlab.deploy",
                                message=message)
        node.values = [KeyValue(key=k, value=_fmt(v)) for k, v in status.items()]
        problems, missing = self.monitor.problems(), self.runtime.never_received()
        inputs = DiagnosticStatus(
            level=DiagnosticStatus.ERROR if problems else DiagnosticStatus.WARN if missing else DiagnosticStatus.OK,
            name=f"{self.get_name()}: inputs", hardware_id="batonlab.deploy",
            message="; ".join(problems) or (f"never received: {missing}" if missing else "all inputs heard"))
        inputs.values = [KeyValue(key=name, value=json.dumps(entry)) for name, entry in self.monitor.report().items()]
        msg = DiagnosticArray(status=[node, inputs])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pub_diagnostics.publish(msg)


def _cmd_vel_command(manifest, name: str):
    """(command fed by cmd_vel or "", Twist → values, the command's fallback value) for the `cmd_vel_command` parameter.

    Raises:
        RefusedToStart: the command is unknown, or a Twist cannot feed it.
    """
    commands = manifest.commands
    if name == "auto":
        candidates = [n for n, c in commands.items() if "lin_vel_x" in c.fields]
        name = candidates[0] if len(candidates) == 1 else ""
    if not name:
        return "", None, None
    if name not in commands:
        raise RefusedToStart(f"cmd_vel_command '{name}' is not a command of the manifest {list(commands)}")
    spec = commands[name]
    if not spec.fields:
        # Older manifests name no fields: map by width, and stand still (zeros) without a Twist.
        if spec.dim not in (2, 3, 6):
            raise RefusedToStart(f"cmd_vel cannot feed the command '{name}' of width {spec.dim} (2, 3 or 6)")
        return name, lambda msg: twist_to_vector(msg, spec.dim), list(spec.default or [0.0] * spec.dim)
    if not any(f in TWIST_FIELDS for f in spec.fields):
        raise RefusedToStart(f"cmd_vel_command '{name}' has no field a Twist carries: {list(spec.fields)} "
                             f"(a Twist carries {list(TWIST_FIELDS)})")
    lacking = [f for f in spec.fields if f not in TWIST_FIELDS]
    if lacking and spec.default is None:
        raise RefusedToStart(f"cmd_vel_command '{name}': a Twist cannot carry {lacking} and the command has no default")
    default = list(spec.default) if spec.default is not None else [0.0] * spec.dim
    return name, lambda msg: twist_to_command(msg, spec.fields, default), default


def _stamp_ns(header) -> int:
    return int(header.stamp.sec) * 1_000_000_000 + int(header.stamp.nanosec)


def _fmt(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def main(args=None) -> int:
    """Entry point; exit code 0 on SIGINT/shutdown, 2 when the node refuses to start."""
    rclpy.init(args=args)
    node = None
    code = 0
    try:
        node = PolicyNode()
        priority = node.params["realtime_priority"]
        if priority:
            failure = use_realtime_priority(priority)
            if failure:
                node.get_logger().warning(f"normal scheduling: {failure}")
            else:
                node.get_logger().info(f"SCHED_FIFO priority {priority}")
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        executor.spin_until_future_complete(node.refused)
        if node.refused.done():
            print(f"[policy_node] refusing to start: {node.refused.result()}", file=sys.stderr, flush=True)
            code = 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RefusedToStart as err:
        print(f"[policy_node] refusing to start: {err}", file=sys.stderr, flush=True)
        code = 2
    except RuntimeError:
        # Ctrl-C that lands while a control step takes a message surfaces as rclpy's conversion error
        # once the context is shut down: that is a shutdown, not a failure.
        if rclpy.ok():
            raise
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
