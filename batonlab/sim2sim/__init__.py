# SPDX-License-Identifier: BSD-3-Clause
"""The task as a robot, without a transport: physics one step at a time, sensors, episodes and their results."""
