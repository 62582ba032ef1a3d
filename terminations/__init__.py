# SPDX-License-Identifier: BSD-3-Clause
"""Termination and success terms: bool tensors (num_envs,).

Installed as `batonlab.terminations`; each module holds one family of terms, all re-exported here for task configs."""

from batonlab.terminations.failures import bad_orientation, illegal_contact, out_of_terrain_bounds
from batonlab.terminations.success import command_tracked, survived
