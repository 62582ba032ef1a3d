# SPDX-License-Identifier: BSD-3-Clause
"""ament_python package `deploy_ros`: build with colcon inside a ROS 2 workspace."""

from glob import glob

from setuptools import find_packages, setup

package_name = "deploy_ros"

setup(
    name=package_name,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + package_name]),
        ("share/" + package_name, ["package.xml"]),
        ("share/" + package_name + "/launch", glob("launch/*.launch.py")),
        ("share/" + package_name + "/config", glob("config/*.yaml") + glob("config/*.xml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="batonlab",
    maintainer_email="batonlab@example.com",
    description="batonlab policies as ROS 2 nodes (policy_node).",
    license="BSD-3-Clause",
    extras_require={"test": ["pytest"]},
    entry_points={
        "console_scripts": [
            "policy_node = deploy_ros.policy_node:main",
        ],
    },
)
