# SPDX-License-Identifier: BSD-3-Clause
"""ament_python package `sim2sim_ros`: build with colcon inside a ROS 2 workspace, next to deploy_ros."""

from glob import glob

from setuptools import find_packages, setup

package_name = "sim2sim_ros"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.launch.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="batonlab",
    maintainer_email="batonlab@example.com",
    description="The training simulation as a ROS 2 robot (sim_robot_node), for sim-to-sim.",
    license="BSD-3-Clause",
    entry_points={"console_scripts": ["sim_robot_node = sim2sim_ros.sim_robot_node:main"]},
)
