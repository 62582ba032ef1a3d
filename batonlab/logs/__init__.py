# SPDX-License-Identifier: BSD-3-Clause
"""Logs: recording simulation rollouts to rosbag2, reading bags, replaying them in simulation, reports."""
