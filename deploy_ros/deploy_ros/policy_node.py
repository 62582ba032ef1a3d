# SPDX-License-Identifier: BSD-3-Clause
"""`policy_node`: a batonlab policy as a ROS 2 node, a thin layer over `batonlab.deploy.DeployRuntime`.

Design and contract notes: docs/modules/deploy_ros.policy_node.md.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from std_msgs.msg import String
from std_srvs.srv import Trigger

from batonlab.deploy import DeployRuntime, ManifestError, State
from batonlab.deploy.null_recorder import NullRecorder
from batonlab.deploy.timing import LoopTiming, use_realtime_priority
from deploy_ros.command_outputs import CommandOutputs
from deploy_ros.node_inputs import PolicyInputs
from deploy_ros.node_params import RefusedToStart, cmd_vel_command, declare_parameters, load_policy_manifest, safety_cfg
from deploy_ros.node_recording import open_recorder
from deploy_ros.stop_signal import run_node

__all__ = ["PolicyNode", "RefusedToStart", "main"]


class PolicyNode(Node):
    """The node: parameters, inputs, outputs and the bag wired around one `DeployRuntime`, stepped by a timer."""

    recorder = NullRecorder()
    """The bag (`deploy_ros.node_recording.open_recorder`); nothing is recorded until it is opened."""

    def __init__(self, **kwargs):
        super().__init__("policy_node", **kwargs)
        self.params = p = declare_parameters(self)
        manifest = load_policy_manifest(p)
        safety = safety_cfg(self, p, manifest)
        self.cmd_vel_command, twist_to_values, default = cmd_vel_command(manifest, p["cmd_vel_command"])
        defaults = {self.cmd_vel_command: default} if self.cmd_vel_command else {}
        timeouts = {self.cmd_vel_command: p["cmd_vel_timeout_s"]} if self.cmd_vel_command else {}
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
        self.commands = CommandOutputs(self, p, self.runtime.joint_names, self.runtime.command_kinds, self.period_s)
        # The control clock: steady wall time on a robot; the simulator's /clock with use_sim_time.
        self.use_sim_time = bool(self.get_parameter("use_sim_time").value)
        self.control_clock = self.get_clock() if self.use_sim_time else Clock(clock_type=ClockType.STEADY_TIME)
        logging.getLogger("batonlab.deploy").addHandler(logging.NullHandler())  # transitions are logged here
        self.refused = Future()
        """Done (with the reason) when the robot turns out to be another robot than the manifest's."""
        self.timing = LoopTiming(self.period_s)
        self._reported_reason = ""

        # Recording (before the subscriptions, whose callbacks record).
        self.recorder = open_recorder(self, p, manifest, self.period_s, self.use_sim_time, self.commands.joint_order)
        self._record_failure_reported = False

        # Publishers.
        self.commands.advertise(self, QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE))
        latched = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.pub_state = self.create_publisher(String, "~/state", latched)
        self.pub_diagnostics = self.create_publisher(DiagnosticArray, "diagnostics", 10)

        # Subscriptions: taken by the control step, never run by the executor.
        self.inputs = PolicyInputs(self, p, manifest, self.runtime, self.recorder, self.cmd_vel_command, twist_to_values,
                                   now=self._now, log_ns=self._log_ns, refuse=self._refuse)
        self.monitor = self.inputs.monitor
        self._stop_phase: str | None = None
        self.create_service(Trigger, "~/reset", self._on_reset)
        self.create_service(Trigger, "~/start", self._on_start)
        self.create_service(Trigger, "~/new_episode", self._on_new_episode)

        self._next_diagnostics = 0.0
        self.create_timer(1.0 / max(p["graph_check_rate_hz"], 1e-3), self._check_graph)
        self.timer = self.create_timer(self.period_s, self._on_timer, clock=self.control_clock)
        stop = self.runtime.safety_cfg
        self.get_logger().info(
            f"policy '{manifest.task}' ({manifest.onnx_path}) at {rate:.1f} Hz; joints {list(manifest.joint_names)}"
            + (f", held {list(manifest.held_joints.names)}" if manifest.held_joints.names else "") + "; "
            f"inputs {dict(joint_states=p['joint_states_topic'], **self.inputs.input_topics)}; "
            f"output {p['output']}: {self.commands.describe()}; "
            f"stale timeout {self.runtime.stale_timeout_s * 1e3:.0f} ms; stop behaviour {stop.stop_behavior}"
            + (f" to {stop.stop_pose} in {stop.stop_time_s:g} s" if stop.stop_behavior == "crouch" else "")
            + f"; e-stop {p['estop_mode']}"
        )
        throttled = self.runtime.throttled_joints()
        if throttled:
            self.get_logger().warning(
                f"max_joint_velocity {stop.max_joint_velocity:g} is below the target rate the policy was trained under "
                f"({', '.join(f'{j} {r:g}' for j, r in throttled.items())} [rad/s or m/s]): its targets move slower "
                "than in training")
        if manifest.joints.gravity_compensation:
            self.get_logger().warning("the policy was trained with gravity compensated by the joint servos "
                                      "(manifest joints.gravity_compensation): the robot's controllers must "
                                      "compensate gravity, or the arm sags away from its targets")
        self._publish_state("passive", "waiting for inputs")

    # Time.

    def _now(self) -> float:
        """Control-clock time [s]: input ages, ramp and watchdog are measured on it."""
        return self.control_clock.now().nanoseconds * 1e-9

    def _log_ns(self) -> int:
        """Log time of recorded messages: the node's ROS clock (the simulator's /clock with use_sim_time) [ns]."""
        return self.get_clock().now().nanoseconds

    def _refuse(self, reason: str) -> None:
        """The robot is not the manifest's robot and nothing was commanded yet: end the node (exit code 2)."""
        if not self.refused.done():
            self.get_logger().error(f"refusing to start: {reason}")
            self.refused.set_result(reason)

    def destroy_node(self):
        """Close the recorder (printing the bag's status if one was open), then destroy the node."""
        status, self.recorder = self.recorder.close(), NullRecorder()
        if status:  # a bag was open
            print(f"[policy_node] recording closed: {status['recording']}, {status['recording_written']} messages, "
                  f"{status['recording_dropped']} dropped, error: {status['recording_error']}", file=sys.stderr, flush=True)
        return super().destroy_node()

    # Services.

    def _on_reset(self, request, response):
        response.success, response.message = self.runtime.reset(self._now())
        return response

    def _on_new_episode(self, request, response):
        # The world was reset under the running policy (sim-to-sim's next episode): its past frames are not this one's.
        self.runtime.new_episode()
        response.success, response.message = True, f"episode {self.runtime.episode}: past frames and last action forgotten"
        return response

    def _on_start(self, request, response):
        self.inputs.take_waiting()
        response.success, response.message = self.runtime.start(self._now())
        missing = self.runtime.never_received()
        if missing:
            response.message += "; never received: " + self.inputs.describe_never_received(missing)
        if not response.success:
            self.get_logger().warning(f"~/start refused: {response.message}")
        return response

    # The control step.

    def _on_timer(self) -> None:
        self.inputs.take_waiting()
        now = self._now()
        late_s = self.timing.tick(now)
        start = time.perf_counter()
        result = self.runtime.step(now)
        if result.command is not None:
            self.commands.publish(result.command)
        compute_s = time.perf_counter() - start
        self.timing.done(compute_s)
        self._record_step(result, compute_s)
        if result.state is State.PASSIVE:
            self._report_waiting(result.reason)
        phase = result.stop_phase
        if phase != self._stop_phase:
            if phase is not None and self._stop_phase is not None:  # within a stop (entering it is a transition)
                self.get_logger().info(f"stop: {self._stop_phase} -> {phase}")
                self._publish_state(State.STOP.value, result.reason)
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
        if result.command is not None:
            self.recorder.joint_command(stamp, result.command[self.commands.record_index])
        obs = result.observation if result.observation is not None else ()
        self.recorder.policy_step(stamp, result.tick, obs, result.raw_action,
                                  result.command, result.state.value, result.reason, episode=self.runtime.episode,
                                  input_ns=self.inputs.joint_stamp_ns,
                                  compute_time_s=compute_time_s)
        self._check_recorder()

    def _check_recorder(self) -> None:
        if not self._record_failure_reported and not self.recorder.ok:
            self._record_failure_reported = True
            self.get_logger().error(f"recording to {self.recorder.path} stopped: {self.recorder.error}; "
                                    "the policy keeps running without it")
            self._publish_diagnostics(self._now())

    def _on_transition(self, transition) -> None:
        text = f"{transition.source.value} -> {transition.target.value}: {transition.reason}"
        if transition.target is State.STOP:
            self.get_logger().warning(text)
        else:
            self.get_logger().info(text)
        self._reported_reason = ""
        self._publish_state(transition.target.value, transition.reason)
        self._publish_diagnostics(self._now())

    # State and diagnostics.

    def _status(self, now: float) -> dict:
        status = self.runtime.status(now)
        status["tick_late_s"] = self.timing.late_s
        status.update(self.inputs.status(now))
        return status

    def _publish_state(self, state: str, reason: str) -> None:
        status = self._status(self._now())
        status.update(state=state, reason=reason, inputs=self.monitor.report())
        self.pub_state.publish(String(data=json.dumps(status)))

    def _publish_diagnostics(self, now: float) -> None:
        status = self._status(now)
        status.update(self.timing.stats())
        status.update(self.recorder.status())
        state = self.runtime.state
        level = {State.RUN: DiagnosticStatus.OK, State.STOP: DiagnosticStatus.ERROR}.get(state, DiagnosticStatus.WARN)
        message = f"{state.value}: {self.runtime.safety.reason}"
        if not self.recorder.ok:
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


def _fmt(value) -> str:
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def main(args=None) -> int:
    """Entry point; exit code 0 on SIGINT/shutdown, 2 when the node refuses to start."""
    return run_node("policy_node", _build, (RefusedToStart,), lambda node: node.refused,
                    refused=lambda node: node.refused.result(), args=args)


def _build() -> PolicyNode:
    node = PolicyNode()
    priority = node.params["realtime_priority"]
    if priority:
        failure = use_realtime_priority(priority)
        if failure:
            node.get_logger().warning(f"normal scheduling: {failure}")
        else:
            node.get_logger().info(f"SCHED_FIFO priority {priority}")
    return node


if __name__ == "__main__":
    sys.exit(main())
