# SPDX-License-Identifier: BSD-3-Clause
"""ROS 2 over loopback for tests: a DDS domain per test, nodes in child processes, fake robots in-process
(`FakeRobot`: the arm of arm_reach, or of arm_lift with its object pose; `FakeWheelLeggedRobot`: the
wheel-legged robot of wl_velocity).

Every participant (child processes and the in-process fake robot) uses the Fast DDS profile
`deploy_ros/config/fastdds_loopback.xml` (UDPv4 on 127.0.0.1 only) and its own ROS_DOMAIN_ID.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import subprocess
import threading
import time
from pathlib import Path

import numpy as np

from batonlab.cli.deploy import loopback_profile, node_command, ros_environment, stop

_domains = itertools.count(random.Random(os.getpid() ^ time.time_ns()).randrange(0, 60))


def new_domain_id() -> int:
    """A ROS_DOMAIN_ID in 101..160, different for each test of this process (0..100 left to people)."""
    return 101 + next(_domains) % 60


def use_loopback_dds() -> None:
    """Point this process's Fast DDS at the loopback profile (before its first participant)."""
    os.environ["FASTDDS_DEFAULT_PROFILES_FILE"] = os.environ["FASTRTPS_DEFAULT_PROFILES_FILE"] = str(loopback_profile())
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


class DdsPeer:
    """An rclpy node in its own context on the test's domain (loopback DDS), spun by a thread.

    Subclasses call `_open_node`, create their publishers and subscriptions, then `_spin_in_background`.
    """

    def _open_node(self, domain_id: int, name: str) -> None:
        import rclpy

        use_loopback_dds()
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=domain_id)
        self.node = rclpy.create_node(name, context=self.context)
        self.lock = threading.Lock()

    def _spin_in_background(self) -> None:
        from rclpy.executors import SingleThreadedExecutor

        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()

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


class PolicyNodePeer(DdsPeer):
    """What every fake robot shares: its own context on the test's domain, the e-stop, the ~/reset and
    ~/start clients, policy_node's state reports and diagnostics, and a spinning thread.

    Subclasses create their publishers and subscriptions between `_open` and `_spin_in_background`.
    """

    def _open(self, domain_id: int, reliability: str):
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import Bool, String
        from std_srvs.srv import Trigger

        self._open_node(domain_id, "fake_robot")
        self.states: list[dict] = []
        self.diagnostics: list = []
        self.cycle_times: list[float] = []
        """time.monotonic() of every publish cycle: how punctual the robot itself was (`own_lateness`)."""
        self.stall_s = 0.0
        """Set > 0 to stall the next publish cycle that long, as a starved robot process would."""
        self._Bool, self._Trigger = Bool, Trigger
        policy = ReliabilityPolicy.RELIABLE if reliability == "reliable" else ReliabilityPolicy.BEST_EFFORT
        self.qos = QoSProfile(depth=10, reliability=policy)
        """QoS of every publisher of the robot."""
        self.pub_estop = self.node.create_publisher(Bool, "estop", self.qos)
        latched = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        self.node.create_subscription(String, "/policy_node/state", self._on_state, latched)
        self.node.create_subscription(DiagnosticArray, "diagnostics", self._on_diagnostics, 10)
        self.reset_client = self.node.create_client(Trigger, "/policy_node/reset")
        self.start_client = self.node.create_client(Trigger, "/policy_node/start")

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

    def _on_state(self, msg, info) -> None:
        with self.lock:
            self.states.append({**json.loads(msg.data), "received": time.monotonic(), "sent": info["source_timestamp"] * 1e-9})

    def _on_diagnostics(self, msg) -> None:
        with self.lock:
            self.diagnostics.append(msg)

    def _cycle(self) -> None:
        """Called at the start of every publish cycle."""
        if self.stall_s:
            stall, self.stall_s = self.stall_s, 0.0
            time.sleep(stall)
        now = time.monotonic()
        with self.lock:
            self.cycle_times.append(now)

    def own_lateness(self) -> str | None:
        """"the test robot itself was late: …" when two of its publish cycles were further apart than the
        node's shortest input timeout (its stale timeout, or the e-stop heartbeat's), else None.

        A stop for stale inputs is then the robot's doing (this process was starved: CPU load, the
        garbage collector), not a misjudgement of the node's."""
        with self.lock:
            cycles, states = np.array(self.cycle_times), list(self.states)
        limits = [s[k] for s in states for k in ("stale_timeout_s", "estop_heartbeat_timeout_s") if s.get(k)]
        if len(cycles) < 2 or not limits:
            return None
        gaps = np.diff(cycles)
        worst = int(np.argmax(gaps))
        if gaps[worst] <= min(limits):
            return None
        return (f"the test robot itself was late: two of its publish cycles went out {gaps[worst] * 1e3:.0f} ms apart "
                f"({cycles[worst] - cycles[0]:.2f} s after its first), over the node's {min(limits) * 1e3:.0f} ms input "
                f"timeout; its own process was starved, the node judged the silence right")

    def state_names(self) -> list[str]:
        with self.lock:
            return [s["state"] for s in self.states]

    def wait_for_state(self, state: str, timeout: float, after: int = 0, reason: str | None = None, **fields) -> dict:
        """The first state report `state` (whose reason contains `reason`, if given, and whose other
        entries equal `fields`) at index >= after."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                for entry in self.states[after:]:
                    if (entry["state"] == state and (reason is None or reason in entry["reason"])
                            and all(entry.get(k) == v for k, v in fields.items())):
                        return entry
            time.sleep(0.02)
        with self.lock:
            seen = [(s["state"], s["reason"]) for s in self.states]
        raise TimeoutError(f"policy_node never reported '{state}' ({reason or 'any reason'}, {fields}) in {timeout} s; "
                           f"it reported {seen}")


class FakeRobot(PolicyNodePeer):
    """The robot side of a policy_node test, spinning in a background thread of the test process.

    Publishes joint states (arm6 names, fingers included), sensors/ee_pos_b, commands/ee_target and
    the pose sensors in `poses` (geometry_msgs/PoseStamped on sensors/<name>, as a perception node
    would) at `rate_hz`, like a robot driver would, with the QoS the driver chooses; records the joint
    commands, policy_node's state reports and diagnostics, and when it published what.

    Args:
        joint_groups: Joint names per JointState message (default: all in one message).
        reliability: "reliable" or "best_effort" for every publisher (drivers use either).
        velocities: Send velocities in joint states (some drivers send positions only).
        poses: Pose sensors to publish: name → (x, y, z, qw, qx, qy, qz), changeable in `poses`.

    `ee_target` is a point (PointStamped) or, with 7 values (x, y, z, qw, qx, qy, qz), a pose (PoseStamped).
    """

    def __init__(self, domain_id: int, joint_names, joint_pos, rate_hz: float = 100.0, joint_groups=None,
                 reliability: str = "reliable", velocities: bool = True, poses: dict | None = None,
                 publish_target: bool = True):
        from geometry_msgs.msg import PointStamped, PoseStamped
        from sensor_msgs.msg import JointState
        from std_msgs.msg import Float64MultiArray

        self._open(domain_id, reliability)
        self.joint_names = list(joint_names)
        self.joint_pos = np.asarray(joint_pos, dtype=float)
        self.joint_groups = [list(g) for g in joint_groups] if joint_groups else [self.joint_names]
        self.velocities = velocities
        self.extra_joints: dict[str, float] = {}
        """Joints added to the first message (an unexpected joint appearing mid-run)."""
        self.ee_pos = [0.3, 0.0, 0.3]
        self.ee_target = [0.4, 0.1, 0.3]
        self.publish_joints = True
        self.publish_target = publish_target
        self.poses = {name: list(value) for name, value in (poses or {}).items()}
        """Pose sensors published every cycle: name → (x, y, z, qw, qx, qy, qz)."""
        self.publish_poses = True
        self.heartbeat = False
        """Publish estop=false with every cycle (heartbeat e-stop mode)."""
        self.commands: list[tuple[float, np.ndarray]] = []
        self.joint_state_times: list[float] = []
        """time.time() of every joint-state cycle sent (the system clock of DDS source stamps)."""
        self.joint_states_sent = 0
        self._JointState, self._PointStamped, self._PoseStamped = JointState, PointStamped, PoseStamped
        qos = self.qos
        self.pub_joints = self.node.create_publisher(JointState, "joint_states", qos)
        self.pub_ee = self.node.create_publisher(PointStamped, "sensors/ee_pos_b", qos)
        self.pub_target = None
        """Created when `publish_target` is first True in a cycle: until then the robot has no such publisher."""
        self.pub_poses = {name: self.node.create_publisher(PoseStamped, f"sensors/{name}", qos) for name in self.poses}
        self.node.create_subscription(Float64MultiArray, "joint_commands", self._on_command, 10)
        self.node.create_timer(1.0 / rate_hz, self._publish)
        self._spin_in_background()

    # Inputs to the policy node.

    def _publish(self) -> None:
        self._cycle()
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
        target_is_pose = len(self.ee_target) == 7
        if self.publish_target and self.pub_target is None:
            self.pub_target = self.node.create_publisher(self._PoseStamped if target_is_pose else self._PointStamped,
                                                         "commands/ee_target", self.qos)
        for pub, value, on in ((self.pub_ee, self.ee_pos, True), (self.pub_target, self.ee_target, self.publish_target)):
            if on:
                pub.publish(sensor_msg(value, stamp))
        for name, pub in self.pub_poses.items():
            if not self.publish_poses:
                break
            msg = sensor_msg(self.poses[name], stamp)
            msg.header.frame_id = "arm_base_site"
            pub.publish(msg)
        if self.heartbeat:
            self.pub_estop.publish(self._Bool(data=False))

    # What the policy node sent.

    def _on_command(self, msg) -> None:
        with self.lock:
            self.commands.append((time.monotonic(), np.array(msg.data)))

    def command_array(self) -> np.ndarray:
        with self.lock:
            return np.array([c for _, c in self.commands])


class FakeWheelLeggedRobot(PolicyNodePeer):
    """The wheel-legged robot (legs by position, wheels by velocity, a stowed arm) as a driver would
    present it to policy_node, spinning in a background thread of the test process.

    Publishes at `rate_hz` joint_states (every joint, velocities included), imu (sensor_msgs/Imu,
    REP-145: level and still unless changed), odom (nav_msgs/Odometry) and, while `twist` is set,
    cmd_vel. Takes the commands of each interface on its own topic (std_msgs/Float64MultiArray in the
    order given for it), records every one with its arrival time (time.monotonic()) and, like ideal
    servos, moves its position joints to their targets and turns its wheels at their commanded speed.

    Args:
        interfaces: Interface → (topic, joint order) of the commands it takes.
        joint_pos: Initial position of each joint by name (every joint the robot has).
        reliability: "reliable" or "best_effort" for every publisher.
        imu_has_orientation: False: an IMU without orientation (REP-145: orientation_covariance[0] = -1).
        sensors: Sensors to publish on sensors/<name> every cycle, changeable in `sensors`: name → 3 values
            (PointStamped: a perception node's object position) or 7 (PoseStamped: x, y, z, qw, qx, qy, qz);
            those in `silent` are not published.
    """

    def __init__(self, domain_id: int, interfaces: dict[str, tuple[str, list[str]]], joint_pos: dict[str, float],
                 rate_hz: float = 100.0, reliability: str = "reliable", imu_has_orientation: bool = True,
                 sensors: dict[str, list[float]] | None = None):
        from geometry_msgs.msg import PointStamped, PoseStamped, Twist
        from nav_msgs.msg import Odometry
        from sensor_msgs.msg import Imu, JointState
        from std_msgs.msg import Float64MultiArray

        self._open(domain_id, reliability)
        self._JointState, self._Imu, self._Odometry, self._Twist = JointState, Imu, Odometry, Twist
        self.dt = 1.0 / rate_hz
        self.interfaces = {kind: (topic, list(order)) for kind, (topic, order) in interfaces.items()}
        self.joint_names = list(joint_pos)
        self.position = dict(joint_pos)
        self.velocity = dict.fromkeys(self.joint_names, 0.0)
        self.publish_joints = True
        self.publish_imu = True
        self.imu_has_orientation = imu_has_orientation
        self.imu_orientation = [1.0, 0.0, 0.0, 0.0]
        """(w, x, y, z) of the IMU frame in a z-up frame."""
        self.imu_gyro = [0.0, 0.0, 0.0]
        self.twist: tuple[float, float] | None = None
        """(linear.x [m/s], angular.z [rad/s]) published on cmd_vel every cycle; None: nothing."""
        self.commands: dict[str, list[tuple[float, np.ndarray]]] = {kind: [] for kind in self.interfaces}
        self.imu_times: list[float] = []
        """time.time() of every imu message sent."""
        self.joint_state_times: list[float] = []
        self.pub_joints = self.node.create_publisher(JointState, "joint_states", self.qos)
        self.pub_imu = self.node.create_publisher(Imu, "imu", self.qos)
        self.pub_odom = self.node.create_publisher(Odometry, "odom", self.qos)
        self.pub_cmd_vel = self.node.create_publisher(Twist, "cmd_vel", self.qos)
        self.sensors = {name: list(values) for name, values in (sensors or {}).items()}
        self.silent: set[str] = set()
        """Sensors not published now (a perception node that stalls)."""
        self.pub_sensors = {name: self.node.create_publisher(PoseStamped if len(values) == 7 else PointStamped,
                                                             f"sensors/{name}", self.qos)
                            for name, values in self.sensors.items()}
        for kind, (topic, _) in self.interfaces.items():
            self.node.create_subscription(Float64MultiArray, topic, lambda msg, kind=kind: self._on_command(kind, msg), 10)
        self.node.create_timer(self.dt, self._publish)
        self._spin_in_background()

    def _publish(self) -> None:
        self._cycle()
        stamp = self.node.get_clock().now().to_msg()
        with self.lock:
            for name, speed in self.velocity.items():
                self.position[name] += speed * self.dt  # wheels turn; position servos have no speed here
            position, velocity = dict(self.position), dict(self.velocity)
        if self.publish_joints:
            msg = self._JointState()
            msg.header.stamp = stamp
            msg.name = self.joint_names
            msg.position = [position[n] for n in self.joint_names]
            msg.velocity = [velocity[n] for n in self.joint_names]
            self.pub_joints.publish(msg)
            with self.lock:
                self.joint_state_times.append(time.time())
        if self.publish_imu:
            imu = self._Imu()
            imu.header.stamp, imu.header.frame_id = stamp, "imu"
            o = imu.orientation
            o.w, o.x, o.y, o.z = (float(v) for v in self.imu_orientation)
            if not self.imu_has_orientation:
                imu.orientation_covariance[0] = -1.0
            w = imu.angular_velocity
            w.x, w.y, w.z = (float(v) for v in self.imu_gyro)
            imu.linear_acceleration.z = 9.81
            self.pub_imu.publish(imu)
            with self.lock:
                self.imu_times.append(time.time())
        for name, pub in self.pub_sensors.items():
            if name not in self.silent:
                pub.publish(sensor_msg(self.sensors[name], stamp))
        odom = self._Odometry()
        odom.header.stamp, odom.header.frame_id, odom.child_frame_id = stamp, "odom", "base"
        odom.pose.pose.position.z = 0.45
        odom.pose.pose.orientation.w = 1.0
        odom.twist.twist.linear.x = 0.25
        odom.twist.twist.angular.z = 0.1
        self.pub_odom.publish(odom)
        if self.twist is not None:
            twist = self._Twist()
            twist.linear.x, twist.angular.z = (float(v) for v in self.twist)
            self.pub_cmd_vel.publish(twist)

    def _on_command(self, kind: str, msg) -> None:
        values = np.array(msg.data)
        with self.lock:
            self.commands[kind].append((time.monotonic(), values))
            order = self.interfaces[kind][1]
            if len(values) != len(order) or not np.isfinite(values).all():
                return  # a driver drops such a frame (the test looks at what arrived)
            for name, value in zip(order, values.tolist()):
                if kind == "velocity":
                    self.velocity[name] = value
                else:
                    self.position[name] = value

    def command_array(self, kind: str, since: float = -np.inf) -> np.ndarray:
        """(N, width) commands of `kind` that arrived after time.monotonic() `since`."""
        with self.lock:
            return np.array([c for t, c in self.commands[kind] if t > since])

    def command_times(self, kind: str) -> np.ndarray:
        with self.lock:
            return np.array([t for t, _ in self.commands[kind]])


def sensor_msg(values, stamp):
    """A sensor reading as a robot's perception node publishes it: 3 values as PointStamped, 7 as PoseStamped."""
    from geometry_msgs.msg import PointStamped, PoseStamped

    values = [float(v) for v in values]
    if len(values) == 7:
        msg = PoseStamped()
        p, o = msg.pose.position, msg.pose.orientation
        p.x, p.y, p.z, o.w, o.x, o.y, o.z = values
    else:
        msg = PointStamped()
        msg.point.x, msg.point.y, msg.point.z = values
    msg.header.stamp = stamp
    return msg


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


@contextlib.contextmanager
def robot_and_node(robot, node: NodeProcess, wait_for: str | None = "run"):
    """Yield (robot, node) once the node reports `wait_for` (None: at once); on a failure print the node's
    output; at the end stop the node (SIGINT while the robot still publishes, as an operator would) and
    require a clean exit: code 0 and no traceback."""
    try:
        if wait_for:
            robot.wait_for_state(wait_for, timeout=90)
        yield robot, node
    except (TimeoutError, AssertionError) as err:
        print(node.output)
        late = robot.own_lateness()
        if late:
            raise AssertionError(f"{late}. The failure it caused: {err}") from err
        raise
    finally:
        code = node.stop()
        robot.close()
        assert code == 0 and "Traceback" not in node.output, f"policy_node did not shut down cleanly:\n{node.output}"
