# SPDX-License-Identifier: BSD-3-Clause
"""ROS 2 package `sim2sim_ros`: the simulator as a robot (`sim_robot_node`), for sim-to-sim runs of policy_node."""
