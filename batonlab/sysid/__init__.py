# SPDX-License-Identifier: BSD-3-Clause
"""System identification: fit a robot's joint and actuator parameters to recorded motion with `mujoco.sysid`."""
