# SPDX-License-Identifier: BSD-3-Clause
"""Test helpers for batonlab.deploy and deploy_ros: synthetic exports, ROS 2 processes on loopback DDS."""
