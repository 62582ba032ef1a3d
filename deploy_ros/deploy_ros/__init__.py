# SPDX-License-Identifier: BSD-3-Clause
"""ROS 2 nodes over `batonlab.deploy`: `policy_node` (robot side) and `sim_robot_node` (simulator side)."""
