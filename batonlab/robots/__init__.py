# SPDX-License-Identifier: BSD-3-Clause
"""Robot models: MJCF loading, attachment with MjSpec, and the constants derived from the files.

`load(path, description)` builds any robot from a URDF or MJCF file plus a robot description
(`batonlab.robots.description`); the bundled robots (`arm6`, `wheel_legged`) have modules of their own.
"""

from batonlab.robots.loader import load

__all__ = ["load"]
