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

    Publishes joint_states (arm6 names, fingers included), sensors/ee_pos_b and commands/ee_target
    at `rate_hz`; records joint commands and policy_node's state transitions.
    """

    def __init__(self, domain_id: int, joint_names, joint_pos, rate_hz: float = 100.0):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from geometry_msgs.msg import PointStamped
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
        self.ee_pos = [0.3, 0.0, 0.3]
        self.ee_target = [0.4, 0.1, 0.3]
        self.publish_joints = True
        self.lock = threading.Lock()
        self.commands: list[tuple[float, np.ndarray]] = []
        self.states: list[dict] = []
        self.joint_states_sent = 0
        self._JointState, self._PointStamped, self._Bool, self._Trigger = JointState, PointStamped, Bool, Trigger
        self.pub_joints = self.node.create_publisher(JointState, "joint_states", 10)
        self.pub_ee = self.node.create_publisher(PointStamped, "sensors/ee_pos_b", 10)
        self.pub_target = self.node.create_publisher(PointStamped, "commands/ee_target", 1)
        self.pub_estop = self.node.create_publisher(Bool, "estop", QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE))
        self.node.create_subscription(Float64MultiArray, "joint_commands", self._on_command, 10)
        latched = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.node.create_subscription(String, "/policy_node/state", self._on_state, latched)
        self.reset_client = self.node.create_client(Trigger, "/policy_node/reset")
        self.node.create_timer(1.0 / rate_hz, self._publish)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

    # Inputs to the policy node.

    def _publish(self) -> None:
        stamp = self.node.get_clock().now().to_msg()
        if self.publish_joints:
            msg = self._JointState()
            msg.header.stamp = stamp
            msg.name = self.joint_names
            msg.position = self.joint_pos.tolist()
            msg.velocity = [0.0] * len(self.joint_names)
            self.pub_joints.publish(msg)
            self.joint_states_sent += 1
        for pub, value in ((self.pub_ee, self.ee_pos), (self.pub_target, self.ee_target)):
            point = self._PointStamped()
            point.header.stamp = stamp
            point.point.x, point.point.y, point.point.z = (float(v) for v in value)
            pub.publish(point)

    def estop(self, active: bool) -> None:
        self.pub_estop.publish(self._Bool(data=active))

    def reset(self, timeout: float = 10.0):
        """Call /policy_node/reset; returns the Trigger response."""
        if not self.reset_client.wait_for_service(timeout_sec=timeout):
            raise TimeoutError("/policy_node/reset is not available")
        future = self.reset_client.call_async(self._Trigger.Request())
        deadline = time.monotonic() + timeout
        while not future.done() and time.monotonic() < deadline:
            time.sleep(0.02)
        return future.result()

    # What the policy node sent.

    def _on_command(self, msg) -> None:
        with self.lock:
            self.commands.append((time.monotonic(), np.array(msg.data)))

    def _on_state(self, msg) -> None:
        with self.lock:
            self.states.append(json.loads(msg.data))

    def state_names(self) -> list[str]:
        with self.lock:
            return [s["state"] for s in self.states]

    def wait_for_state(self, state: str, timeout: float, after: int = 0) -> dict:
        """The first state report `state` at index >= after."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for entry in self.states[after:]:
                    if entry["state"] == state:
                        return entry
            time.sleep(0.02)
        raise TimeoutError(f"policy_node never reported '{state}' in {timeout} s; it reported {self.state_names()}")

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
