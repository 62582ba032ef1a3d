# SPDX-License-Identifier: BSD-3-Clause
"""Command terms: per-env targets a policy follows, resampled on timers (`batonlab.env.commands.CommandTerm`).

Installed as `batonlab.commands`; each module holds one family of terms, all re-exported here for task configs."""

from batonlab.commands.base_velocity import BaseVelocityCommand
from batonlab.commands.ee_pose import EndEffectorPoseCommand
from batonlab.commands.ee_target import (
    NUM_CANDIDATES,
    EndEffectorTargetCommand,
    cartesian_to_spherical,
    clear_of_robot,
    spherical_to_cartesian,
)
from batonlab.commands.position import PositionCommand, UniformPositionCommand
