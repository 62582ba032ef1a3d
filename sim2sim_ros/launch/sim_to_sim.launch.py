# SPDX-License-Identifier: BSD-3-Clause
"""Sim-to-sim: sim_robot_node (the training scene as a ROS 2 robot) and policy_node.

    ros2 launch sim2sim_ros sim_to_sim.launch.py export:=/path/to/exported [task:=arm_reach] [num_episodes:=20]
    ros2 launch sim2sim_ros sim_to_sim.launch.py export:=/path/to/wl_export task:=wl_velocity cmd_vel_command:=base_velocity
    ros2 launch sim2sim_ros sim_to_sim.launch.py export:=/path/to/reach_export task:=reach robot:=/path/to/my_arm.yaml

The wheel-legged robot takes legs on joint_commands/position and wheels on joint_commands/velocity
(policy_node publishes one message per command interface); with `cmd_vel_command:=base_velocity`
the simulator publishes the task's velocity command as a Twist on cmd_vel, which policy_node feeds
to the policy (its default `cmd_vel_command: auto`), as a joystick or planner would on a robot.

`batonlab deploy --sim EXPORT_DIR` starts the same two nodes with the same parameters without
`ros2 launch` (for machines that have rclpy from PyPI but not the launch tools).
"""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import ParameterValue


def generate_launch_description():
    config = os.path.join(get_package_share_directory("sim2sim_ros"), "config", "sim_to_sim.yaml")
    export = LaunchConfiguration("export")
    task = LaunchConfiguration("task")
    robot = LaunchConfiguration("robot")
    seed = LaunchConfiguration("seed")
    num_episodes = LaunchConfiguration("num_episodes")
    cmd_vel_command = LaunchConfiguration("cmd_vel_command")
    lockstep = LaunchConfiguration("lockstep")
    return LaunchDescription([
        DeclareLaunchArgument("export", description="folder written by `batonlab export` (policy.onnx + manifest.json)"),
        DeclareLaunchArgument("task", default_value="arm_reach"),
        DeclareLaunchArgument("robot", default_value="",
                              description="robot description YAML of a task over any robot (reach, velocity); '': the task's own"),
        DeclareLaunchArgument("seed", default_value="0"),
        DeclareLaunchArgument("num_episodes", default_value="0", description="0: run until stopped"),
        DeclareLaunchArgument("cmd_vel_command", default_value="",
                              description="task command the simulator publishes on cmd_vel (wl_*: base_velocity); '': none"),
        DeclareLaunchArgument("lockstep", default_value="true",
                              description="each control period waits for the policy's commands; false: real time, as a robot"),
        Node(
            package="sim2sim_ros", executable="sim_robot_node", output="screen",
            parameters=[config, {"task": task, "robot": ParameterValue(robot, value_type=str),
                                 "seed": ParameterValue(seed, value_type=int),
                                 "num_episodes": ParameterValue(num_episodes, value_type=int),
                                 "cmd_vel_command": ParameterValue(cmd_vel_command, value_type=str),
                                 "lockstep": ParameterValue(lockstep, value_type=bool)}],
        ),
        Node(package="deploy_ros", executable="policy_node", output="screen", parameters=[config, {"manifest": export}]),
    ])
