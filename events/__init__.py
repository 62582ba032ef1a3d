# SPDX-License-Identifier: BSD-3-Clause
"""Event terms: randomisation and perturbation `(env, env_ids, **params)` at startup, reset or on timers.

Installed as `batonlab.events`; each module holds one family of terms, all re-exported here for task configs."""

from batonlab.events.door import RandomizeDoor
from batonlab.events.holder import RandomizeHolderPath, move_holder, redraw_holder_turn
from batonlab.events.joints import hold_default_pose, reset_joints_uniform
from batonlab.events.objects import RandomizeObject
from batonlab.events.physics import (
    randomize_action_delay,
    randomize_actuator_gains,
    randomize_body_mass_and_com,
    randomize_geom_friction,
    randomize_joint_parameters,
)
from batonlab.events.root import push_by_setting_velocity, reset_root_on_terrain
from batonlab.events.upper_commands import PlayRecordedCommands, play_recorded_commands
