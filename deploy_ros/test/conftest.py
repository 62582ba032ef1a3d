# SPDX-License-Identifier: BSD-3-Clause
"""Keep the package tests' DDS traffic on 127.0.0.1 unless the caller chose a profile."""

import os
from pathlib import Path

_PROFILE = Path(__file__).resolve().parents[1] / "config" / "fastdds_loopback.xml"
for _var in ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE"):
    os.environ.setdefault(_var, str(_PROFILE))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
