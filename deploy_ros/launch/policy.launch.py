# SPDX-License-Identifier: BSD-3-Clause
"""policy_node on a robot: `ros2 launch deploy_ros policy.launch.py export:=/path/to/exported [config:=my_robot.yaml]`."""

import os

from ament_index_python.packages import get_package_share_directory
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node


def generate_launch_description():
    default_config = os.path.join(get_package_share_directory("deploy_ros"), "config", "policy_node.yaml")
    return LaunchDescription([
        DeclareLaunchArgument("export", description="folder written by `batonlab export` (policy.onnx + manifest.json)"),
        DeclareLaunchArgument("config", default_value=default_config, description="parameters of policy_node"),
        Node(
            package="deploy_ros", executable="policy_node", output="screen", emulate_tty=True,
            parameters=[LaunchConfiguration("config"), {"manifest": LaunchConfiguration("export")}],
        ),
    ])
