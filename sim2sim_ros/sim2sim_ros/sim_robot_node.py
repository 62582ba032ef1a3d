# SPDX-License-Identifier: BSD-3-Clause
"""`sim_robot_node`: a task's MuJoCo scene as a ROS 2 robot, for sim-to-sim over real ROS 2.

Design and contract notes: docs/modules/sim2sim_ros.sim_robot_node.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from geometry_msgs.msg import PoseStamped, Quaternion, Twist
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from rclpy.time import Time
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray, String
from std_srvs.srv import Trigger
from trajectory_msgs.msg import JointTrajectory

from batonlab.deploy.wiring import WiringError, twist_lacking_fields
from deploy_ros.messages import command_to_twist, pose_to_msg, vector_to_msg
from batonlab.sim2sim.results import EpisodeLog, write_results
from batonlab.sim2sim.robot import ConfigError, SimRobot
from deploy_ros.stop_signal import run_node

PARAMETERS = {
    "task": "arm_reach",
    "robot": "",  # robot description YAML of a task over any robot (reach, velocity); empty: the task's own
    "lower_export": "",  # a hierarchy's task: the whole-body policy's export (a two-level export's lower/); else empty
    "fit": "",  # a `batonlab sysid` fit.yaml: the robot it identified (its joint randomisation off); empty: the task's
    "seed": 0,  # episode i starts from the initial state of seed + i; also seeds the IMU noise
    "num_episodes": 0,  # 0: run forever
    "warmup_s": 3.0,  # commands must flow this long before the first episode (the policy's soft start)
    "results_file": "",  # JSON summary of the episodes done so far, rewritten after each
    "exit_when_done": True,
    "command_topic": "joint_commands",  # one interface: its topic; several: the prefix of command_topics.<I>
    "trajectory_topic": "joint_trajectory",
    "command_joint_order": [""],  # one interface: order of the Float64MultiArray; empty: all its joints
    "frame_id": "",  # frame of sensors and task commands; empty: the robot's root body
    "publish_clock": True,  # publish /clock (simulated time) for nodes with use_sim_time
    "real_time_factor": 1.0,  # physics steps/s = real_time_factor / physics_dt (at most) while no lockstep period runs
    "imu_noise": False,  # add the policy observation's training noise to the imu message
    "cmd_vel_command": "",  # a task command to publish as a Twist on cmd_vel ("": none)
    "state_file": "",  # .npz of the world state after every physics step, written when the node ends ("": none)
    "policy_node": "",  # a policy node told of each new episode (~/new_episode), whose stops are reported per
    # episode and reset between episodes ("": none)
    "lockstep": False,  # each control period waits for the commands computed from its state, then runs at once
    "lockstep_timeout_s": 1.0,  # wall seconds a period waits for them before it runs on without
}
"""Parameters of every robot. A robot with several command interfaces also declares, per interface I,
`command_topics.I` (default `<command_topic>/I`) and `command_joint_orders.I` (default: I's joints)."""


NEW_EPISODE_TIMEOUT_S = 2.0
"""Wall seconds a new episode's first state waits for the policy node's `new_episode` reply before it goes out."""


class SimRobotNode(Node):
    """A task's MuJoCo scene as a ROS 2 robot: publishes state, sensors and task commands, applies joint commands."""

    def __init__(self, **kwargs):
        super().__init__("sim_robot_node", **kwargs)
        p = {name: self.declare_parameter(name, default).value for name, default in PARAMETERS.items()}
        self.params = p
        self.robot = SimRobot(p["task"], seed=p["seed"], robot=p["robot"] or None,
                              lower_export=p["lower_export"] or None, fit=p["fit"] or None)
        robot = self.robot
        self.inputs = self._command_inputs(p)
        """Interface → (topic, joint order) of the Float64MultiArray it takes."""
        self.cmd_vel_command = p["cmd_vel_command"]
        self._cmd_vel_fields = self._fix_fields_twist_lacks(self.cmd_vel_command) if self.cmd_vel_command else ()
        self.frame_id = p["frame_id"] or robot.root_body
        self.imu_noise = np.random.default_rng(p["seed"]) if p["imu_noise"] else None
        """Generator of the IMU noise, seeded from `seed` (None: noise-free)."""
        self.done = Future()
        self.log = EpisodeLog(p["task"], p["seed"], bool(p["lockstep"]))
        """Episode bookkeeping: command timing, stops, outcomes, the run's summary."""
        self.first_command_time: float | None = None
        """Simulated time of the first received command [s]."""
        self.states: list[tuple] | None = [] if p["state_file"] else None
        """(time [s], episode, qpos, qvel, sensordata) after every physics step, for `state_file`."""

        sensor_qos = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
        self.pub_joint_states = self.create_publisher(JointState, "joint_states", sensor_qos)
        self.pub_imu = self.create_publisher(Imu, "imu", sensor_qos)
        self.pub_odom = self.create_publisher(Odometry, "odom", sensor_qos)
        self.pub_sensors = {n: self.create_publisher(type(vector_to_msg(robot.sensor(n))), f"sensors/{n}", sensor_qos)
                            for n in robot.sensor_names}
        self.pub_poses = {n: self.create_publisher(PoseStamped, f"sensors/{n}", sensor_qos) for n in robot.pose_sensors}
        self.pub_commands = {n: self.create_publisher(type(self._command_msg(n)), f"commands/{n}", 1)
                             for n in robot.command_names}
        self.pub_cmd_vel = self.create_publisher(Twist, "cmd_vel", 1) if self.cmd_vel_command else None
        self.pub_episode = self.create_publisher(String, "~/episode", 10)
        self.pub_clock = self.create_publisher(ClockMsg, "/clock", 10) if p["publish_clock"] else None
        for kind, (topic, order) in self.inputs.items():
            self.create_subscription(Float64MultiArray, topic,
                                     lambda msg, kind=kind: self._on_forward_command(kind, msg), 1)
        self.create_subscription(JointTrajectory, p["trajectory_topic"], self._on_trajectory, 1)
        self.policy_stopped: str | None = None
        """Why the followed policy node is stopped now (None: it is not, or none is followed)."""
        self.policy_state: str | None = None
        """The followed policy node's state (passive, ramp, run, stop); None until heard or when none is followed."""
        self.lockstep = bool(p["lockstep"])
        self._lockstep_engaged = False
        """Commands flow (none timed out since the last one): the next period waits for its own."""
        self._period_start: tuple[int, float] | None = None
        """(physics step, steady time [s]) at which the current period's state went out, until its command is in."""
        self._period_kinds: set[str] = set()
        """Command interfaces heard from since the current period's state went out."""
        self._reset_policy = self._new_episode = None
        self._held: tuple[object, Future, float] | None = None
        """(the step's ended episode or None, the policy's new_episode reply, steady time [s] asked): the new
        episode's first state waits for the policy node to forget the last one."""
        if p["policy_node"]:
            latched = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self.create_subscription(String, f"{p['policy_node']}/state", self._on_policy_state, latched)
            self._reset_policy = self.create_client(Trigger, f"{p['policy_node']}/reset")
            self._new_episode = self.create_client(Trigger, f"{p['policy_node']}/new_episode")
        period = robot.physics_dt / max(p["real_time_factor"], 1e-3)
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.timer = self.create_timer(period, self._on_timer, clock=self._steady)
        inputs = ", ".join(f"{kind} {order} on {topic}" for kind, (topic, order) in self.inputs.items())
        self.get_logger().info(
            f"{p['task']}: {len(robot.joint_names)} joints at {1 / robot.physics_dt:.0f} Hz, commands: {inputs}; "
            f"sensors {robot.sensor_names}, poses {list(robot.pose_sensors)}, task commands {robot.command_names}, "
            f"imu frame '{robot.imu().frame_id}'"
            + (f", {self.cmd_vel_command} {list(self._cmd_vel_fields)} on cmd_vel" if self.cmd_vel_command else "")
        )

    # Configuration.

    def _command_inputs(self, p: dict) -> dict[str, tuple[str, list[str]]]:
        """Topic and joint order of each command interface (see the module docstring)."""
        interfaces = self.robot.interfaces
        if len(interfaces) == 1:
            (kind, joints), = interfaces.items()
            order = [s for s in p["command_joint_order"] if s] or joints
            unknown = [j for j in order if j not in joints]
            if unknown:
                raise ConfigError(f"command_joint_order names joints {unknown} that the task does not command {joints}")
            return {kind: (p["command_topic"], order)}
        if any(p["command_joint_order"]):
            raise ConfigError(f"the robot has several command interfaces {list(interfaces)}: set command_joint_orders."
                              "<interface> instead of command_joint_order")
        inputs = {}
        for kind, joints in interfaces.items():
            topic = self.declare_parameter(f"command_topics.{kind}", f"{p['command_topic']}/{kind}").value
            order = [s for s in self.declare_parameter(f"command_joint_orders.{kind}", joints).value if s]
            unknown = [j for j in order if j not in joints]
            if unknown or not order:
                raise ConfigError(f"command_joint_orders.{kind} names joints {unknown} that are not the robot's {kind} "
                                  f"joints {joints}")
            inputs[kind] = (topic, order)
        return inputs

    def _fix_fields_twist_lacks(self, command: str) -> tuple[str, ...]:
        """Fix the fields of `command` that a Twist cannot carry at the command's default; returns its fields."""
        robot = self.robot
        if command not in robot.command_names:
            raise ConfigError(f"cmd_vel_command '{command}' is not a command of the task {robot.command_names}")
        term = robot.env.command_manager.terms[command]
        fields = tuple(term.fields)
        default = term.default_value()
        try:
            lacking = twist_lacking_fields(command, fields, default is not None)
        except WiringError as err:
            raise ConfigError(str(err)) from None
        for field in lacking:
            robot.fix_command_field(command, field, default[fields.index(field)])
        return fields

    # Callbacks.

    def _on_forward_command(self, kind: str, msg: Float64MultiArray) -> None:
        order = self.inputs[kind][1]
        if len(msg.data) != len(order):
            self.get_logger().warning(f"dropped a {kind} command of {len(msg.data)} values, expected {len(order)}",
                                      throttle_duration_sec=1.0)
            return
        self._apply(order, msg.data, kind)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if not msg.points:
            return
        position_joints = self.robot.interfaces.get("position", [])
        others = [j for j in msg.joint_names if j not in position_joints]
        if others or len(msg.points[0].positions) != len(msg.joint_names):
            self.get_logger().error(f"dropped a joint trajectory for {list(msg.joint_names)} with "
                                    f"{len(msg.points[0].positions)} positions; the robot's position joints are "
                                    f"{position_joints}", throttle_duration_sec=1.0)
            return
        self._apply(msg.joint_names, msg.points[0].positions, "position")

    def _on_policy_state(self, msg: String) -> None:
        try:
            status = json.loads(msg.data)
            state, reason = str(status["state"]), str(status.get("reason", ""))
        except (ValueError, KeyError, TypeError):
            self.get_logger().warning("dropped a policy state that is not the policy node's JSON", throttle_duration_sec=1.0)
            return
        self.policy_state = state
        if state == "stop":
            if self.policy_stopped is None and self.robot.episode_index >= 0:
                self.get_logger().warning(f"the policy stopped in episode {self.robot.episode_index}: {reason}")
            self.policy_stopped = self.policy_stopped or reason
            if self.robot.episode_index >= 0:
                self.log.policy_stopped(reason)
        else:
            self.policy_stopped = None

    def _on_policy_reset(self, future) -> None:
        response = future.result()
        if response is not None and not response.success:
            self.get_logger().warning(f"the policy node refused the reset: {response.message}")

    def _apply(self, names, values, kind: str) -> None:
        values = np.asarray(values, dtype=np.float64)
        if not np.isfinite(values).all():
            # A real servo drive rejects such a frame; count it, keep the previous targets.
            self.get_logger().error("received a non-finite joint command", throttle_duration_sec=1.0)
            return
        self.robot.set_targets(names, values)
        self.log.command_applied()
        if self.first_command_time is None:
            self.first_command_time = self.sim_time
        self._lockstep_engaged = True
        if self._period_start is not None:
            self._period_kinds.add(kind)
            if self._period_kinds >= self.inputs.keys():
                self.log.period_commanded(self.robot.physics_steps - self._period_start[0])
                self._period_start = None
                if self.lockstep and self._policy_owes_commands():
                    self._run_rest_of_period()

    def _policy_owes_commands(self) -> bool:
        """Whether the followed policy sends a command every period (ramp or run; always without `policy_node`)."""
        return self.policy_state in (None, "ramp", "run")

    def _run_rest_of_period(self) -> None:
        """Lockstep: the period's commands are in, so its physics steps run now, back to back, up to the
        next period's start (where the wait for that period's commands begins)."""
        self._physics_step()
        while self.robot.physics_steps % self.robot.decimation and not self.done.done():
            self._physics_step()

    def _waits_for_commands(self) -> bool:
        """Lockstep: the current period's commands are due and not all in, and the wait has not timed out."""
        if not (self.lockstep and self._lockstep_engaged and self._period_start is not None
                and self.robot.physics_steps == self._period_start[0]):
            return False
        if not self._policy_owes_commands():
            return False  # a passive or stopped policy commands nothing (or holds): nothing to wait for
        if self._steady_s() - self._period_start[1] < self.params["lockstep_timeout_s"]:
            return True
        timeouts = self.log.lockstep_timed_out()
        self._lockstep_engaged = False  # run on until commands flow again
        self.get_logger().warning(f"lockstep: no command {self.params['lockstep_timeout_s']:g} s after the period's "
                                  f"state went out; running on without it ({timeouts} this episode)",
                                  throttle_duration_sec=5.0)
        return False

    def _steady_s(self) -> float:
        return self._steady.now().nanoseconds * 1e-9

    def _on_timer(self) -> None:
        """The wall-clock pace: one physics step, unless lockstep waits for this period's commands or a new
        episode waits for the policy node to forget the last one."""
        if self._held is not None:
            result, reply, asked = self._held
            if not reply.done() and self._steady_s() - asked < NEW_EPISODE_TIMEOUT_S:
                return
            if not reply.done():
                self.get_logger().warning(f"{self.params['policy_node']}/new_episode did not answer within "
                                          f"{NEW_EPISODE_TIMEOUT_S:g} s: the episode starts on its past frames")
            self._held = None
            self._publish_step(result)
            return
        if not self._waits_for_commands():
            self._physics_step()

    def _tell_policy_new_episode(self, result) -> bool:
        """Ask the policy node to forget the last episode before the new one's first state (this step's) goes out;
        False when no policy node with that service is followed (the state goes out at once)."""
        if self._new_episode is None or not self._new_episode.service_is_ready():
            return False
        self._held = (result, self._new_episode.call_async(Trigger.Request()), self._steady_s())
        return True

    def _physics_step(self) -> None:
        """One physics step, then its messages (held while the policy node hears of a new episode)."""
        robot = self.robot
        result = robot.step()
        started = (robot.episode_index < 0 and robot.physics_steps % robot.decimation == 0
                   and self.first_command_time is not None
                   and self.sim_time - self.first_command_time >= self.params["warmup_s"])
        if started:
            # Episode 0 begins at a period's start, as every later one does: its reset state is the state this
            # period publishes, so its first commands are computed from it (not from the warm-up's last state).
            self.get_logger().info(f"warm-up done; episode 0 (seed {robot.base_seed})")
            robot.next_episode()
            self.log.restart_episode()  # episode 0's figures, not the warm-up's
        if self.states is not None:
            self.states.append((self.sim_time, robot.episode_index, *robot.world_state()))
        if (result is not None or started) and self._tell_policy_new_episode(result):
            return
        self._publish_step(result)

    def _publish_step(self, result) -> None:
        """The step's messages, and at a period's end the task's commands and episode bookkeeping."""
        robot = self.robot
        stamp = Time(nanoseconds=int(round(self.sim_time * 1e9))).to_msg() if self.pub_clock else self.get_clock().now().to_msg()
        self._publish_state(stamp)
        period_ended = robot.physics_steps % robot.decimation == 0
        if period_ended:
            # The next period starts now: its commands will be computed from the state just published.
            self._period_start, self._period_kinds = (robot.physics_steps, self._steady_s()), set()
            for name, pub in self.pub_commands.items():
                pub.publish(self._command_msg(name, stamp))
            if self.pub_cmd_vel is not None:
                self.pub_cmd_vel.publish(command_to_twist(self._cmd_vel_fields, robot.command(self.cmd_vel_command)))
        if result is not None:
            self._record(result)
        if self.pub_clock is not None:
            # Last: nodes on sim time see this step's state before their timers fire for it.
            self.pub_clock.publish(ClockMsg(clock=stamp))

    @property
    def sim_time(self) -> float:
        """Simulated time since the node started [s]."""
        return self.robot.physics_steps * self.robot.physics_dt

    # Publishing.

    def _command_msg(self, name: str, stamp=None):
        """Task command `name` as its message: PoseStamped for a pose, else `vector_to_msg`'s, in `frame_id`."""
        value = self.robot.command(name)
        if name in self.robot.pose_commands:
            return pose_to_msg(value, stamp, self.frame_id)
        return vector_to_msg(value, stamp, self.frame_id)

    def _publish_state(self, stamp) -> None:
        robot = self.robot
        pos, vel = robot.joint_state()
        js = JointState()
        js.header.stamp = stamp
        js.name = robot.joint_names
        js.position = pos.tolist()
        js.velocity = vel.tolist()
        self.pub_joint_states.publish(js)
        for name, pub in self.pub_sensors.items():
            pub.publish(vector_to_msg(robot.sensor(name), stamp, self.frame_id))
        for name, pub in self.pub_poses.items():
            pub.publish(pose_to_msg(robot.pose(name), stamp, robot.pose_frames[name]))
        reading = robot.imu(self.imu_noise)
        imu = Imu()
        imu.header.stamp, imu.header.frame_id = stamp, reading.frame_id
        imu.orientation = _quaternion(reading.orientation)
        imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = reading.angular_velocity.tolist()
        imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z = reading.linear_acceleration.tolist()
        if self.imu_noise is not None:
            rot_std, gyro_std = robot.imu_noise_std
            imu.orientation_covariance[0::4] = [rot_std ** 2] * 3
            imu.angular_velocity_covariance[0::4] = [gyro_std ** 2] * 3
        self.pub_imu.publish(imu)
        base = robot.base_motion()
        odom = Odometry()
        odom.header.stamp, odom.header.frame_id, odom.child_frame_id = stamp, "odom", robot.root_body
        odom.pose.pose.position.x, odom.pose.pose.position.y, odom.pose.pose.position.z = base.position.tolist()
        odom.pose.pose.orientation = _quaternion(base.orientation)
        twist = odom.twist.twist
        twist.linear.x, twist.linear.y, twist.linear.z = base.linear_velocity.tolist()
        twist.angular.x, twist.angular.y, twist.angular.z = base.angular_velocity.tolist()
        self.pub_odom.publish(odom)

    def write_state_file(self) -> None:
        """Write the recorded world states to `state_file` (see the module docstring)."""
        if not self.states:
            return
        time_s, episode, qpos, qvel, sensordata = zip(*self.states)
        path = Path(self.params["state_file"])
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, time_s=np.array(time_s), episode=np.array(episode), qpos=np.stack(qpos), qvel=np.stack(qvel),
                 sensordata=np.stack(sensordata))

    def _record(self, result) -> None:
        entry = self.log.end_episode(result, policy_stop=self.policy_stopped)
        if self.policy_stopped is not None and self._reset_policy is not None:
            # Stop is latched: reset it between trials, or every later episode is lost to one stall.
            self.get_logger().info(f"resetting the stopped policy ({self.policy_stopped}) for the next episode")
            self._reset_policy.call_async(Trigger.Request()).add_done_callback(self._on_policy_reset)
        summary = self.log.summary()
        if self.params["results_file"]:  # before the episode is announced: whoever hears of it finds it in the file
            write_results(Path(self.params["results_file"]), summary)
        self.pub_episode.publish(String(data=json.dumps(entry)))
        ending = "failed" if result.terminated else "timed out"
        speed = "" if result.mean_speed_error is None else f", mean speed error {result.mean_speed_error:.3f} m/s"
        self.get_logger().info(f"episode {result.index} (seed {result.seed}): success={result.success}, {ending} after "
                               f"{result.length} control steps, distance={result.final_distance}{speed}")
        n = self.params["num_episodes"]
        if n and len(self.log.entries) >= n:
            self.get_logger().info(f"{n} episodes: success rate {summary['success_rate']:.3f}")
            if self.params["exit_when_done"] and not self.done.done():
                self.done.set_result(summary)


def _quaternion(wxyz) -> Quaternion:
    w, x, y, z = (float(v) for v in wxyz)
    return Quaternion(w=w, x=x, y=y, z=z)


def main(args=None) -> int:
    """Entry point; exit code 0 when done or stopped, 2 when the configuration cannot run."""
    return run_node("sim_robot_node", SimRobotNode, (ConfigError,), lambda node: node.done, close=_close, args=args)


def _close(node: SimRobotNode) -> None:
    node.write_state_file()
    node.robot.close()


if __name__ == "__main__":
    sys.exit(main())
