# SPDX-License-Identifier: BSD-3-Clause
"""`sim_robot_node`: a task's MuJoCo scene as a ROS 2 robot, for sim-to-sim over real ROS 2.

Publishes at the physics rate (one message of each per physics step, on a steady-clock timer):
joint_states (every 1-DoF joint of the scene), imu and odom of the robot's root body, and the
sensors the policy reads on sensors/<name>. Publishes the task's commands (e.g. the reach target)
on commands/<name> every control period, like an operator or a planner would. Applies joint
targets received on joint_commands (std_msgs/Float64MultiArray, in `command_joint_order`) or
joint_trajectory (trajectory_msgs/JointTrajectory, by name) through the task's position actuators,
the PD servos used in training.

Time: physics runs on a steady wall-clock timer at `real_time_factor` × real time (or slower, if
the CPU cannot keep up), and /clock carries the simulated time, so a policy node with
`use_sim_time:=true` acts once per simulated control period whatever the wall-clock speed.

Episodes: after `warmup_s` simulated seconds of received commands (the policy node's soft start), the node
runs `num_episodes` episodes; episode i starts from the initial state of seed `seed + i`
(`sim_robot.seed_episode`), ends on the task's time limit or on one of its failure terms, and is
judged by the task's success term. Results go to ~/episode (JSON) and, at the end, to `results_file`.

A configuration the node cannot run (an unknown task, `command_joint_order` naming joints the task
does not command) is one line on stderr, "[sim_robot_node] refusing to start: …", and exit code 2.

This node is the simulator: it imports batonlab.env and batonlab.tasks (torch, mujoco).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import mujoco
import numpy as np
import rclpy
from geometry_msgs.msg import Quaternion
from nav_msgs.msg import Odometry
from rclpy.clock import Clock, ClockType
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.task import Future
from rclpy.time import Time
from rosgraph_msgs.msg import Clock as ClockMsg
from sensor_msgs.msg import Imu, JointState
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

from deploy_ros.messages import vector_to_msg
from deploy_ros.sim_robot import ConfigError, SimRobot

PARAMETERS = {
    "task": "arm_reach",
    "seed": 0,  # episode i starts from the initial state of seed + i
    "num_episodes": 0,  # 0: run forever
    "warmup_s": 3.0,  # commands must flow this long before the first episode (the policy's soft start)
    "results_file": "",  # JSON summary written when num_episodes are done
    "exit_when_done": True,
    "command_topic": "joint_commands",
    "trajectory_topic": "joint_trajectory",
    "command_joint_order": [""],  # order of the Float64MultiArray; empty: the task's action joints
    "frame_id": "",  # frame of sensors and task commands; empty: the robot's root body
    "publish_clock": True,  # publish /clock (simulated time) for nodes with use_sim_time
    "real_time_factor": 1.0,  # physics steps run at real_time_factor / physics_dt per wall second (at most)
}


class SimRobotNode(Node):
    def __init__(self, **kwargs):
        super().__init__("sim_robot_node", **kwargs)
        p = {name: self.declare_parameter(name, default).value for name, default in PARAMETERS.items()}
        self.params = p
        self.robot = SimRobot(p["task"], seed=p["seed"])
        robot = self.robot
        order = [s for s in p["command_joint_order"] if s] or robot.command_joints
        unknown = sorted(set(order) - set(robot.command_joints))
        if unknown:
            raise ConfigError(f"command_joint_order names joints {unknown} that the task does not command "
                              f"{robot.command_joints}")
        self.command_joint_order = order
        self.root_body, self._base_pose = _root_body(robot.env.scene.model, robot.command_joints[0])
        self.frame_id = p["frame_id"] or self.root_body
        self.done = Future()
        self.results: list[dict] = []
        self.first_command_time: float | None = None
        """Simulated time of the first received command [s]."""
        self.commands_received = 0

        sensor_qos = QoSProfile(depth=5, reliability=ReliabilityPolicy.RELIABLE)
        self.pub_joint_states = self.create_publisher(JointState, "joint_states", sensor_qos)
        self.pub_imu = self.create_publisher(Imu, "imu", sensor_qos)
        self.pub_odom = self.create_publisher(Odometry, "odom", sensor_qos)
        self.pub_sensors = {n: self.create_publisher(type(vector_to_msg(robot.sensor(n))), f"sensors/{n}", sensor_qos)
                            for n in robot.sensor_names}
        self.pub_commands = {n: self.create_publisher(type(vector_to_msg(robot.command(n))), f"commands/{n}", 1)
                             for n in robot.command_names}
        self.pub_episode = self.create_publisher(String, "~/episode", 10)
        self.pub_clock = self.create_publisher(ClockMsg, "/clock", 10) if p["publish_clock"] else None
        self.create_subscription(Float64MultiArray, p["command_topic"], self._on_forward_command, 1)
        self.create_subscription(JointTrajectory, p["trajectory_topic"], self._on_trajectory, 1)
        period = robot.physics_dt / max(p["real_time_factor"], 1e-3)
        self.timer = self.create_timer(period, self._on_physics_step, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.get_logger().info(
            f"{p['task']}: {len(robot.joint_names)} joints at {1 / robot.physics_dt:.0f} Hz, commands {order} on "
            f"{p['command_topic']}, sensors {robot.sensor_names}, task commands {robot.command_names}"
        )

    # Callbacks.

    def _on_forward_command(self, msg: Float64MultiArray) -> None:
        if len(msg.data) != len(self.command_joint_order):
            self.get_logger().warning(f"dropped a command of {len(msg.data)} values, expected {len(self.command_joint_order)}",
                                      throttle_duration_sec=1.0)
            return
        self._apply(self.command_joint_order, msg.data)

    def _on_trajectory(self, msg: JointTrajectory) -> None:
        if msg.points:
            self._apply(msg.joint_names, msg.points[0].positions)

    def _apply(self, names, values) -> None:
        values = np.asarray(values, dtype=np.float64)
        if not np.isfinite(values).all():
            # A real servo drive rejects such a frame; count it, keep the previous targets.
            self.get_logger().error("received a non-finite joint command", throttle_duration_sec=1.0)
            return
        try:
            self.robot.set_targets(names, values)
        except ValueError:
            self.get_logger().error(f"joint command for unknown joints {list(names)}; the robot takes "
                                    f"{self.robot.command_joints}", throttle_duration_sec=1.0)
            return
        self.commands_received += 1
        if self.first_command_time is None:
            self.first_command_time = self.sim_time

    def _on_physics_step(self) -> None:
        robot = self.robot
        result = robot.step()
        stamp = Time(nanoseconds=int(round(self.sim_time * 1e9))).to_msg() if self.pub_clock else self.get_clock().now().to_msg()
        self._publish_state(stamp)
        period_ended = robot.physics_steps % robot.decimation == 0
        if period_ended:
            for name, pub in self.pub_commands.items():
                pub.publish(vector_to_msg(robot.command(name), stamp, self.frame_id))
        if result is not None:
            self._record(result)
        elif (period_ended and robot.episode_index < 0 and self.first_command_time is not None
              and self.sim_time - self.first_command_time >= self.params["warmup_s"]):
            self.get_logger().info(f"warm-up done; episode 0 (seed {robot.base_seed})")
            robot.next_episode()
        if self.pub_clock is not None:
            # Last: nodes on sim time see this step's state before their timers fire for it.
            self.pub_clock.publish(ClockMsg(clock=stamp))

    @property
    def sim_time(self) -> float:
        """Simulated time since the node started [s]."""
        return self.robot.physics_steps * self.robot.physics_dt

    # Publishing.

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
        quat, lin_vel_w, ang_vel_b = self._base_motion()
        imu = Imu()
        imu.header.stamp, imu.header.frame_id = stamp, self.root_body
        imu.orientation = Quaternion(w=quat[0], x=quat[1], y=quat[2], z=quat[3])
        imu.angular_velocity.x, imu.angular_velocity.y, imu.angular_velocity.z = ang_vel_b.tolist()
        # Proper acceleration of a base at rest: gravity's reaction, in the base frame.
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, quat)
        acc = rot.reshape(3, 3).T @ np.array([0.0, 0.0, 9.81])
        imu.linear_acceleration.x, imu.linear_acceleration.y, imu.linear_acceleration.z = acc.tolist()
        self.pub_imu.publish(imu)
        odom = Odometry()
        odom.header.stamp, odom.header.frame_id, odom.child_frame_id = stamp, "odom", self.root_body
        position = self._base_position()
        odom.pose.pose.position.x, odom.pose.pose.position.y, odom.pose.pose.position.z = position.tolist()
        odom.pose.pose.orientation = imu.orientation
        odom.twist.twist.linear.x, odom.twist.twist.linear.y, odom.twist.twist.linear.z = lin_vel_w.tolist()
        odom.twist.twist.angular = imu.angular_velocity
        self.pub_odom.publish(odom)

    def _base_motion(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Orientation (wxyz), linear velocity (world) and angular velocity (base frame) of the root body."""
        if self._base_pose is None:  # floating base: its free joint leads qpos/qvel
            qpos, qvel = self.robot.env.sim.qpos[0].double().numpy(), self.robot.env.sim.qvel[0].double().numpy()
            return qpos[3:7], qvel[0:3], qvel[3:6]
        return self._base_pose[1], np.zeros(3), np.zeros(3)

    def _base_position(self) -> np.ndarray:
        if self._base_pose is None:
            return self.robot.env.sim.qpos[0, 0:3].double().numpy()
        return self._base_pose[0]

    def _record(self, result) -> None:
        entry = {"episode": result.index, "seed": result.seed, "success": result.success, "length": result.length,
                 "terminated": result.terminated, "final_distance": result.final_distance,
                 "commands_received": self.commands_received}
        self.results.append(entry)
        self.pub_episode.publish(String(data=json.dumps(entry)))
        ending = "failed" if result.terminated else "timed out"
        self.get_logger().info(f"episode {result.index} (seed {result.seed}): success={result.success}, {ending} after "
                               f"{result.length} control steps, distance={result.final_distance}")
        n = self.params["num_episodes"]
        if n and len(self.results) >= n:
            summary = {"task": self.params["task"], "seed": self.params["seed"], "num_episodes": n,
                       "success_rate": float(np.mean([r["success"] for r in self.results])), "episodes": self.results}
            if self.params["results_file"]:
                path = Path(self.params["results_file"])
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(summary, indent=2))
            self.get_logger().info(f"{n} episodes: success rate {summary['success_rate']:.3f}")
            if self.params["exit_when_done"] and not self.done.done():
                self.done.set_result(summary)


def _root_body(model: mujoco.MjModel, joint: str):
    """The robot's root body (the child of the world above `joint`) and its fixed pose, or None if it floats."""
    body = int(model.jnt_bodyid[model.joint(joint).id])
    while int(model.body_parentid[body]) != 0:
        body = int(model.body_parentid[body])
    name = model.body(body).name
    if model.body_jntnum[body] and int(model.jnt_type[model.body_jntadr[body]]) == int(mujoco.mjtJoint.mjJNT_FREE):
        return name, None
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    return name, (data.xpos[body].copy(), data.xquat[body].copy())


def main(args=None) -> int:
    """Entry point; exit code 0 when done or stopped, 2 when the configuration cannot run."""
    rclpy.init(args=args)
    node = None
    code = 0
    try:
        node = SimRobotNode()
        rclpy.spin_until_future_complete(node, node.done)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except ConfigError as err:
        print(f"[sim_robot_node] refusing to start: {err}", file=sys.stderr, flush=True)
        code = 2
    finally:
        if node is not None:
            node.robot.close()
            node.destroy_node()
        rclpy.try_shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
