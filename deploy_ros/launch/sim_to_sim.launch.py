# SPDX-License-Identifier: BSD-3-Clause
"""Sim-to-sim: sim_robot_node (the training scene as a ROS 2 robot) and policy_node.

    ros2 launch deploy_ros sim_to_sim.launch.py export:=/path/to/exported [task:=arm_reach] [num_episodes:=20]

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
    config = os.path.join(get_package_share_directory("deploy_ros"), "config", "sim_to_sim.yaml")
    export = LaunchConfiguration("export")
    task = LaunchConfiguration("task")
    seed = LaunchConfiguration("seed")
    num_episodes = LaunchConfiguration("num_episodes")
    return LaunchDescription([
        DeclareLaunchArgument("export", description="folder written by `batonlab export` (policy.onnx + manifest.json)"),
        DeclareLaunchArgument("task", default_value="arm_reach"),
        DeclareLaunchArgument("seed", default_value="0"),
        DeclareLaunchArgument("num_episodes", default_value="0", description="0: run until stopped"),
        Node(
            package="deploy_ros", executable="sim_robot_node", output="screen",
            parameters=[config, {"task": task, "seed": ParameterValue(seed, value_type=int),
                                 "num_episodes": ParameterValue(num_episodes, value_type=int)}],
        ),
        Node(package="deploy_ros", executable="policy_node", output="screen", parameters=[config, {"manifest": export}]),
    ])
