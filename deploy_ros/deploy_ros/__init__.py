# SPDX-License-Identifier: BSD-3-Clause
"""ROS 2 nodes over `batonlab.deploy`: `policy_node`, the robot's; it imports neither torch nor mujoco."""
