# SPDX-License-Identifier: BSD-3-Clause
"""ROS 2 over loopback for tests: a DDS domain per test, nodes in child processes, a fake robot in-process.

Every participant (child processes and the in-process fake robot) uses the Fast DDS profile
`deploy_ros/config/fastdds_loopback.xml` (UDPv4 on 127.0.0.1 only) and its own ROS_DOMAIN_ID.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

from batonlab.cli.deploy import LOOPBACK_PROFILE, node_command, ros_environment, stop

_domains = itertools.count(random.Random(os.getpid() ^ time.time_ns()).randrange(0, 60))


def new_domain_id() -> int:
    """A ROS_DOMAIN_ID in 101..160, different for each test of this process (0..100 left to people)."""
    return 101 + next(_domains) % 60


def use_loopback_dds() -> None:
    """Point this process's Fast DDS at the loopback profile (before its first participant)."""
    os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = str(LOOPBACK_PROFILE)
    os.environ["FASTRTPS_DEFAULT_PROFILES_FILE"] = str(LOOPBACK_PROFILE)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")


class NodeProcess:
    """A deploy_ros node in a child process, its output in a log file."""

    def __init__(self, node: str, domain_id: int, log_dir: Path, params_files=(), params: dict | None = None):
        self.log_path = Path(log_dir) / f"{node}.log"
        self._log = open(self.log_path, "w")
        self.process = subprocess.Popen(node_command(node, params_files, params), env=ros_environment(domain_id),
                                        stdout=self._log, stderr=subprocess.STDOUT)

    @property
    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def wait(self, timeout: float) -> int:
        return self.process.wait(timeout)

    def stop(self) -> int:
        code = stop(self.process)
        self._log.close()
        return code


class FakeRobot:
    """The robot side of a policy_node test, spinning in a background thread of the test process.

    Publishes joint states (arm6 names, fingers included), sensors/ee_pos_b and commands/ee_target
    at `rate_hz`, like a robot driver would, with the QoS the driver chooses; records the joint
    commands, policy_node's state reports and diagnostics, and when it published what.

    Args:
        joint_groups: Joint names per JointState message (default: all in one message).
        reliability: "reliable" or "best_effort" for every publisher (drivers use either).
        velocities: Send velocities in joint states (some drivers send positions only).
    """

    def __init__(self, domain_id: int, joint_names, joint_pos, rate_hz: float = 100.0, joint_groups=None,
                 reliability: str = "reliable", velocities: bool = True):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import PointStamped
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Bool, Float64MultiArray, String
        from std_srvs.srv import Trigger

        use_loopback_dds()
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node("fake_robot", context=self.context)
        self.joint_names = list(joint_names)
        self.joint_pos = np.asarray(joint_pos, dtype=float)
        self.joint_groups = [list(g) for g in joint_groups] if joint_groups else [self.joint_names]
        self.velocities = velocities
        self.extra_joints: dict[str, float] = {}
        """Joints added to the first message (an unexpected joint appearing mid-run)."""
        self.ee_pos = [0.3, 0.0, 0.3]
        self.ee_target = [0.4, 0.1, 0.3]
        self.publish_joints = True
        self.publish_target = True
        self.heartbeat = False
        """Publish estop=false with every cycle (heartbeat e-stop mode)."""
        self.lock = threading.Lock()
        self.commands: list[tuple[float, np.ndarray]] = []
        self.states: list[dict] = []
        self.diagnostics: list = []
        self.joint_state_times: list[float] = []
        """time.time() of every joint-state cycle sent (the system clock of DDS source stamps)."""
        self.joint_states_sent = 0
        self._JointState, self._PointStamped, self._Bool, self._Trigger = JointState, PointStamped, Bool, Trigger
        policy = ReliabilityPolicy.RELIABLE if reliability == "reliable" else ReliabilityPolicy.BEST_EFFORT
        qos = QoSProfile(depth=10, reliability=policy)
        self.pub_joints = self.node.create_publisher(JointState, "joint_states", qos)
        self.pub_ee = self.node.create_publisher(PointStamped, "sensors/ee_pos_b", qos)
        self.pub_target = self.node.create_publisher(PointStamped, "commands/ee_target", qos)
        self.pub_estop = self.node.create_publisher(Bool, "estop", qos)
        self.node.create_subscription(Float64MultiArray, "joint_commands", self._on_command, 10)
        latched = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.node.create_subscription(String, "/policy_node/state", self._on_state, latched)
        self.node.create_subscription(DiagnosticArray, "diagnostics", self._on_diagnostics, 10)
        self.reset_client = self.node.create_client(Trigger, "/policy_node/reset")
        self.start_client = self.node.create_client(Trigger, "/policy_node/start")
        self.node.create_timer(1.0 / rate_hz, self._publish)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    # Inputs to the policy node.

    def _publish(self) -> None:
        stamp = self.node.get_clock().now().to_msg()
        if self.publish_joints:
            position = dict(zip(self.joint_names, self.joint_pos.tolist()))
            for k, group in enumerate(self.joint_groups):
                names = group + (list(self.extra_joints) if k == 0 else [])
                position.update(self.extra_joints)
                msg = self._JointState()
                msg.header.stamp = stamp
                msg.name = names
                msg.position = [position[n] for n in names]
                msg.velocity = [0.0] * len(names) if self.velocities else []
                self.pub_joints.publish(msg)
            with self.lock:
                self.joint_state_times.append(time.time())
            self.joint_states_sent += 1
        for pub, value, on in ((self.pub_ee, self.ee_pos, True), (self.pub_target, self.ee_target, self.publish_target)):
            if not on:
                continue
            point = self._PointStamped()
            point.header.stamp = stamp
            point.point.x, point.point.y, point.point.z = (float(v) for v in value)
            pub.publish(point)
        if self.heartbeat:
            self.pub_estop.publish(self._Bool(data=False))

    def estop(self, active: bool) -> None:
        self.pub_estop.publish(self._Bool(data=active))

    def reset(self, timeout: float = 10.0):
        """Call /policy_node/reset; returns the Trigger response."""
        return self._call(self.reset_client, timeout)

    def start(self, timeout: float = 10.0):
        """Call /policy_node/start; returns the Trigger response."""
        return self._call(self.start_client, timeout)

    def _call(self, client, timeout: float):
        if not client.wait_for_service(timeout_sec=timeout):
            raise TimeoutError(f"{client.srv_name} is not available")
        future = client.call_async(self._Trigger.Request())
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.02)
        return future.result()

    # What the policy node sent.

    def _on_command(self, msg) -> None:
        with self.lock:
            self.commands.append((time.monotonic(), np.array(msg.data)))

    def _on_state(self, msg, info) -> None:
        with self.lock:
            self.states.append({**json.loads(msg.data), "received": time.monotonic(), "sent": info["source_timestamp"] * 1e-9})

    def _on_diagnostics(self, msg) -> None:
        with self.lock:
            self.diagnostics.append(msg)

    def state_names(self) -> list[str]:
        with self.lock:
            return [s["state"] for s in self.states]

    def wait_for_state(self, state: str, timeout: float, after: int = 0, reason: str | None = None) -> dict:
        """The first state report `state` (whose reason contains `reason`, if given) at index >= after."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for entry in self.states[after:]:
                    if entry["state"] == state and (reason is None or reason in entry["reason"]):
                        return entry
            time.sleep(0.02)
        with self.lock:
            seen = [(s["state"], s["reason"]) for s in self.states]
        raise TimeoutError(f"policy_node never reported '{state}' ({reason or 'any reason'}) in {timeout} s; it reported {seen}")

    def command_array(self) -> np.ndarray:
        with self.lock:
            return np.array([c for _, c in self.commands])

    def _spin(self) -> None:
        try:
            self.executor.spin()
        except Exception:  # the context was shut down
            pass

    def close(self) -> None:
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        self.context.try_shutdown()
        self._thread.join(timeout=5.0)


class CpuLoad:
    """Busy processes on every core (the robot computer under load), as a context manager."""

    def __init__(self, processes: int | None = None):
        self.processes = processes or os.cpu_count() or 1
        self._procs: list[subprocess.Popen] = []

    def __enter__(self) -> CpuLoad:
        import sys

        self._procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.processes)]
        return self

    def __exit__(self, *exc) -> None:
        for proc in self._procs:
            proc.kill()
            proc.wait()
