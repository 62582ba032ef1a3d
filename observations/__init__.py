# SPDX-License-Identifier: BSD-3-Clause
"""Observation terms by what they read: `(env, **params) -> (num_envs, k)` tensors.

Installed as `batonlab.observations`; each module holds one family of terms, all re-exported here for task configs."""

from batonlab.observations.commands import generated_command
from batonlab.observations.door import contacts_relaxed, door_physics, joint_angle, sensor_offset
from batonlab.observations.objects import (body_lin_vel, body_pos, body_quat, ee_to_body, holder_velocity_heading,
                                          object_physics, touch_flags)
from batonlab.observations.privileges import privilege_level
from batonlab.observations.proprioception import joint_pos_rel, joint_vel, last_action
from batonlab.observations.root_state import (
    base_height,
    root_ang_vel_b,
    root_lin_vel_b,
    root_lin_vel_heading,
    root_lin_vel_w,
    root_pos_w,
    root_projected_gravity,
    root_quat_w,
    root_yaw_rate_w,
)
from batonlab.observations.sensors import projected_gravity, sensor, sensor_pose
