# SPDX-License-Identifier: BSD-3-Clause
"""`policy_node`: a batonlab policy as a ROS 2 node, a thin layer over `batonlab.deploy.DeployRuntime`.

Subscribes:  joint_states (sensor_msgs/JointState), imu (sensor_msgs/Imu), cmd_vel (geometry_msgs/Twist),
             estop (std_msgs/Bool, true = stop), sensors/<name> and commands/<name> for the inputs the
             manifest names (see `deploy_ros.messages`).
Publishes:   joint commands as std_msgs/Float64MultiArray for ros2_control's forward controllers
             (and/or trajectory_msgs/JointTrajectory), ~/state (std_msgs/String, JSON, one per
             state transition, latched) and diagnostics (diagnostic_msgs/DiagnosticArray).
Services:    ~/reset (leave damp; refused while the e-stop is on), ~/start (when auto_start is off).
Recording:   with `record:=true`, a rosbag2 (MCAP) bag in `record_dir` holds the received inputs, every
             policy step (observation, raw and filtered action, safety state) and the commands sent
             (`batonlab.deploy.recording`; `batonlab replay BAG` replays it in simulation). A separate
             writer process serialises and writes; if writing fails (disk full) the node logs it,
             reports it in diagnostics and keeps controlling.

The control step runs on a steady-clock timer at the manifest's control rate; input ages are
measured from message arrival on the same steady clock, so the watchdog works whatever the robot's
header stamps say. With `use_sim_time:=true` (sim-to-sim), both follow the simulator's /clock
instead, so a simulator slower than real time still sees one control step per control period. Only batonlab.deploy, rclpy and message packages are imported: no torch, no mujoco.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path

import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Twist
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Bool, Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from batonlab.deploy import DeployRuntime, InputError, JointMismatchError, ManifestError, SafetyCfg, State, load_manifest
from deploy_ros.messages import float_array, msg_to_vector, twist_to_vector, vector_msg_type

PARAMETERS = {
    "manifest": "",  # manifest.json or the export folder holding it and policy.onnx
    "verify_hash": True,  # check policy.onnx against the manifest's sha256
    "control_rate_hz": 0.0,  # 0: the manifest's control rate
    "joint_states_topic": "joint_states",
    "imu_topic": "imu",
    "cmd_vel_topic": "cmd_vel",
    "estop_topic": "estop",
    "command_topic": "joint_commands",  # e.g. /forward_position_controller/commands
    "trajectory_topic": "joint_trajectory",  # e.g. /joint_trajectory_controller/joint_trajectory
    "output": "forward",  # forward (Float64MultiArray) | trajectory (JointTrajectory) | both
    "command_joint_order": [""],  # joint order of the forward controller; empty: the manifest's
    "ignored_joints": [""],  # robot joints the policy does not use (gripper, head …)
    "cmd_vel_command": "",  # manifest command fed by cmd_vel ("" : none)
    "cmd_vel_timeout_s": 0.5,  # cmd_vel falls back to zero after this
    "ramp_time_s": 2.0,
    "stale_timeout_s": 0.0,  # 0: two control periods
    "max_joint_velocity": 3.0,
    "position_margin": 0.0,
    "torque_limit_scale": 1.0,
    "damp_mode": "damp",  # damp | hold
    "auto_start": True,
    "diagnostics_rate_hz": 2.0,
    "record": False,  # write a rosbag2 (MCAP) bag of inputs, policy steps and commands
    "record_dir": "bags",  # bags go to <record_dir>/<task>_<date-time>
    "record_robot": "",  # robot name stored in the bag's metadata
    "record_seed": -1,  # seed stored in the bag's metadata (sim-to-sim episodes); -1: none
}
"""Parameters and their defaults (config/policy_node.yaml documents them for a robot)."""


class RefusedToStart(RuntimeError):
    """The node cannot run this policy on this robot (bad manifest, joint mismatch)."""


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
        safety = SafetyCfg(
            ramp_time_s=p["ramp_time_s"], stale_timeout_s=p["stale_timeout_s"] or None,
            max_joint_velocity=p["max_joint_velocity"], position_margin=p["position_margin"],
            torque_limit_scale=p["torque_limit_scale"], damp_mode=p["damp_mode"], auto_start=p["auto_start"],
        )
        cmd_vel_command = p["cmd_vel_command"]
        if cmd_vel_command and cmd_vel_command not in manifest.commands:
            raise RefusedToStart(f"cmd_vel_command '{cmd_vel_command}' is not a command of the manifest {list(manifest.commands)}")
        defaults = {cmd_vel_command: [0.0] * manifest.commands[cmd_vel_command]["dim"]} if cmd_vel_command else {}
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
        order = p["command_joint_order"] or list(manifest.joint_names)
        if sorted(order) != sorted(manifest.joint_names):
            raise RefusedToStart(f"command_joint_order {order} must be a permutation of the policy joints {list(manifest.joint_names)}")
        self.command_joint_order = order
        self._out_idx = np.array([manifest.joint_names.index(n) for n in order])
        # The control clock: steady wall time on a robot; the simulator's /clock with use_sim_time.
        self.use_sim_time = bool(self.get_parameter("use_sim_time").value)
        self.control_clock = self.get_clock() if self.use_sim_time else Clock(clock_type=ClockType.STEADY_TIME)
        logging.getLogger("batonlab.deploy").addHandler(logging.NullHandler())  # transitions are logged here

        # Recording (before the subscriptions, whose callbacks record).
        self._joint_stamp_ns = 0
        self.recorder = self._open_recorder(p) if p["record"] else None
        self._record_failure_reported = False

        # Publishers.
        reliable = QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        latched = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.pub_forward = self.create_publisher(Float64MultiArray, p["command_topic"], reliable) if p["output"] in ("forward", "both") else None
        self.pub_trajectory = (self.create_publisher(JointTrajectory, p["trajectory_topic"], reliable)
                               if p["output"] in ("trajectory", "both") else None)
        if self.pub_forward is None and self.pub_trajectory is None:
            raise RefusedToStart(f"output must be forward, trajectory or both, got '{p['output']}'")
        self.pub_state = self.create_publisher(String, "~/state", latched)
        self.pub_diagnostics = self.create_publisher(DiagnosticArray, "diagnostics", 10)

        # Subscriptions.
        self.create_subscription(JointState, p["joint_states_topic"], self._on_joint_states, qos_profile_sensor_data)
        self.create_subscription(Imu, p["imu_topic"], self._on_imu, qos_profile_sensor_data)
        self.create_subscription(Bool, p["estop_topic"], self._on_estop, QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        self.create_subscription(Twist, p["cmd_vel_topic"], self._on_cmd_vel, 10)
        self.input_topics = {}
        for name, slot in self.runtime.vectors.items():
            if name == cmd_vel_command:
                continue
            group = "sensor_topics" if slot.kind == "sensor" else "command_topics"
            default = f"{'sensors' if slot.kind == 'sensor' else 'commands'}/{name}"
            topic = self.declare_parameter(f"{group}.{name}", default).value
            qos = qos_profile_sensor_data if slot.kind == "sensor" else QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
            self.create_subscription(vector_msg_type(slot.dim), topic, self._vector_callback(name), qos)
            self.input_topics[name] = topic
        self.imu_stamp: float | None = None
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(Trigger, "~/start", self._on_start)

        self.step_times_s: list[float] = []
        self._next_diagnostics = 0.0
        self._last_command: np.ndarray | None = None
        self.timer = self.create_timer(self.period_s, self._on_timer, clock=self.control_clock)
        self.get_logger().info(
            f"policy '{manifest.task}' ({manifest.onnx_path}) at {rate:.1f} Hz; joints {list(manifest.joint_names)}; "
            f"inputs {dict(joint_states=p['joint_states_topic'], **self.input_topics)}; "
            f"output {p['output']} on {p['command_topic'] if self.pub_forward else p['trajectory_topic']}"
        )
        self._publish_state("passive", "waiting for inputs")

    def _now(self) -> float:
        """Control-clock time [s]: input ages, ramp and watchdog are measured on it."""
        return self.control_clock.now().nanoseconds * 1e-9

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
        raw = {k: v for k, v in self.manifest.raw.items() if k != "training_config"}
        metadata = {
            "source": "policy_node", "task": self.manifest.task, "robot": p["record_robot"] or None,
            "seed": p["record_seed"] if p["record_seed"] >= 0 else None,
            "manifest_sha256": sha256_file(manifest_file), "manifest_source": "export",
            "export_dir": str(manifest_file.parent.resolve()), "manifest": raw,
            "control_dt": self.period_s, "use_sim_time": self.use_sim_time,
        }
        topics = {"joint_states": self.resolve_topic_name(p["joint_states_topic"]), "imu": self.resolve_topic_name(p["imu_topic"]),
                  "cmd_vel": self.resolve_topic_name(p["cmd_vel_topic"]),
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

    # Callbacks.

    def _on_joint_states(self, msg: JointState) -> None:
        try:
            self.runtime.set_joint_state(msg.name, msg.position, msg.velocity, self._now())
        except JointMismatchError as err:
            raise RefusedToStart(str(err)) from None
        except InputError as err:
            self.get_logger().warning(f"dropped joint_states: {err}", throttle_duration_sec=1.0)
        self._joint_stamp_ns = _stamp_ns(msg.header)
        if self.recorder is not None:
            self.recorder.joint_state(self._log_ns(), msg.position, msg.velocity, msg.effort, names=tuple(msg.name),
                                      header_ns=self._joint_stamp_ns)

    def _vector_callback(self, name: str):
        record = None
        if self.recorder is not None:
            record = self.recorder.sensor if self.runtime.vectors[name].kind == "sensor" else self.recorder.task_command

        def callback(msg) -> None:
            values = msg_to_vector(msg)
            try:
                if not self.runtime.set_vector(name, values, self._now()):
                    self.get_logger().warning(f"rejected non-finite {name}", throttle_duration_sec=1.0)
            except InputError as err:
                self.get_logger().warning(f"dropped {name}: {err}", throttle_duration_sec=1.0)
            if record is not None:
                header = getattr(msg, "header", None)
                record(name, self._log_ns(), values, header_ns=_stamp_ns(header) if header is not None else None)
        return callback

    def _on_cmd_vel(self, msg: Twist) -> None:
        if self.recorder is not None:
            self.recorder.twist(self._log_ns(), (msg.linear.x, msg.linear.y, msg.linear.z),
                                (msg.angular.x, msg.angular.y, msg.angular.z))
        name = self.params["cmd_vel_command"]
        if not name:
            return
        values = twist_to_vector(msg, self.runtime.vectors[name].dim)
        if not self.runtime.set_vector(name, values, self._now()):
            self.get_logger().warning("rejected non-finite cmd_vel", throttle_duration_sec=1.0)

    def _on_imu(self, msg: Imu) -> None:
        # No observation term reads the IMU yet (batonlab.deploy refuses unknown terms); its age is reported.
        self.imu_stamp = self._now()
        if self.recorder is not None:
            o, w, a = msg.orientation, msg.angular_velocity, msg.linear_acceleration
            self.recorder.imu(self._log_ns(), (o.w, o.x, o.y, o.z), (w.x, w.y, w.z), (a.x, a.y, a.z),
                              frame_id=msg.header.frame_id, header_ns=_stamp_ns(msg.header))

    def _on_estop(self, msg: Bool) -> None:
        self.runtime.set_estop(bool(msg.data), self._now())

    def _on_reset(self, request, response):
        response.success, response.message = self.runtime.reset(self._now())
        return response

    def _on_start(self, request, response):
        self.runtime.start()
        response.success, response.message = True, "start requested"
        return response

    def _on_timer(self) -> None:
        now = self._now()
        start = time.perf_counter()
        result = self.runtime.step(now)
        if result.command is not None:
            self._publish_command(result.command)
        if self.recorder is not None:
            self._record_step(result, time.perf_counter() - start)
        self.step_times_s.append(time.perf_counter() - start)
        if len(self.step_times_s) > 4096:
            del self.step_times_s[:2048]
        if now >= self._next_diagnostics:
            self._next_diagnostics = now + 1.0 / max(self.params["diagnostics_rate_hz"], 1e-3)
            self._publish_diagnostics(now)

    def _record_step(self, result, compute_time_s: float) -> None:
        """The step's observation, raw action and filtered command (enqueued; written by the recorder's thread)."""
        stamp = self._log_ns()
        ran = result.raw_action is not None
        if result.command is not None:
            self.recorder.joint_command(stamp, result.command[self._out_idx])
        self.recorder.policy_step(stamp, result.tick, self.runtime.observation.obs if ran else (), result.raw_action,
                                  result.command, result.state.value, result.reason, input_ns=self._joint_stamp_ns,
                                  compute_time_s=compute_time_s)
        self._check_recorder()

    def _on_transition(self, transition) -> None:
        text = f"{transition.source.value} -> {transition.target.value}: {transition.reason}"
        if transition.target is State.DAMP:
            self.get_logger().warning(text)
        else:
            self.get_logger().info(text)
        self._publish_state(transition.target.value, transition.reason)
        self._publish_diagnostics(self._now())

    # Publishing.

    def _publish_command(self, command: np.ndarray) -> None:
        values = command[self._out_idx]
        if self.pub_forward is not None:
            self.pub_forward.publish(float_array(values))
        if self.pub_trajectory is not None:
            msg = JointTrajectory()
            msg.joint_names = list(self.command_joint_order)
            point = JointTrajectoryPoint()
            point.positions = values.tolist()
            point.time_from_start.nanosec = int(self.period_s * 1e9)
            msg.points = [point]
            self.pub_trajectory.publish(msg)

    def _publish_state(self, state: str, reason: str) -> None:
        status = self.runtime.status(self._now())
        status.update(state=state, reason=reason)
        self.pub_state.publish(String(data=json.dumps(status)))

    def _publish_diagnostics(self, now: float) -> None:
        status = self.runtime.status(now)
        status["imu_age_s"] = None if self.imu_stamp is None else now - self.imu_stamp
        if getattr(self, "recorder", None) is not None:
            status.update(self.recorder.status())
        if self.step_times_s:
            times = np.array(self.step_times_s[-512:]) * 1e6
            status["step_time_p50_us"], status["step_time_max_us"] = float(np.median(times)), float(times.max())
        state = self.runtime.state
        level = {State.RUN: DiagnosticStatus.OK, State.DAMP: DiagnosticStatus.ERROR}.get(state, DiagnosticStatus.WARN)
        message = f"{state.value}: {self.runtime.safety.reason}"
        if getattr(self, "recorder", None) is not None and not self.recorder.ok:
            message += f"; recording stopped: {self.recorder.error}"
        entry = DiagnosticStatus(level=level, name=f"{self.get_name()}: {self.manifest.task}", hardware_id="batonlab.deploy",
                                 message=message)
        entry.values = [KeyValue(key=k, value=_fmt(v)) for k, v in status.items()]
        msg = DiagnosticArray(status=[entry])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.pub_diagnostics.publish(msg)


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
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except RefusedToStart as err:
        print(f"[policy_node] refusing to start: {err}", file=sys.stderr, flush=True)
        code = 2
    finally:
        if node is not None:
            node.destroy_node()
        rclpy.try_shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
