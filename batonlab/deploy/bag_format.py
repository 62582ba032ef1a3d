# SPDX-License-Identifier: BSD-3-Clause
"""The batonlab bag: rosbag2 (MCAP storage), the same layout from the robot and from simulation.

Design and contract notes: docs/modules/batonlab.deploy.bag_format.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

POLICY_STEP_TYPE = "batonlab_msgs/msg/PolicyStep"
"""ROS type name of the batonlab per-step message."""

POLICY_STEP_MSG = """\
# One control step of a batonlab policy (written by batonlab.deploy.recording).
std_msgs/Header header              # stamp: time of the control step
uint64 step                         # policy step index since the start of the recording
uint32 episode                      # episode index (simulation); 0 on a robot
float32[] observation               # policy input, in the manifest's observation layout
float32[] action_raw                # policy output, before post-processing
float64[] action_filtered           # joint targets after post-processing and the safety filter (joint order)
string safety_state                 # passive | ramp | run | stop; "sim" in simulation
string safety_reason                # why the safety filter is in that state
builtin_interfaces/Time input_stamp # header stamp of the joint states the step used (zero: same as header)
float64 compute_time                # wall time of the control step [s]; 0 when not measured
"""
"""`batonlab_msgs/msg/PolicyStep` as a .msg definition."""

BAG_FORMAT = "batonlab-bag/1"
"""Value of `format` in the metadata; bumped when the layout changes."""

DEFAULT_TOPICS = {
    "joint_states": "/joint_states",
    "imu": "/imu",
    "odom": "/odom",
    "cmd_vel": "/cmd_vel",
    "joint_commands": "/joint_commands",
    "policy_step": "/batonlab/policy_step",
    "metadata": "/batonlab/metadata",
}
"""Role → topic. The roles used by a bag are stored in its metadata under `topics`."""

COMMAND_TOPIC_PREFIX = "/commands/"
"""Task commands are recorded on `/commands/<name>`."""

SENSOR_TOPIC_PREFIX = "/sensors/"
"""Sensors the policy reads by name are recorded on `/sensors/<name>`."""

POSE_STAMPED = "geometry_msgs/msg/PoseStamped"
"""Type of a pose sensor's topic (`batonlab.deploy.pose`: read back as x, y, z, qw, qx, qy, qz)."""

MSG_TYPES = {
    "joint_states": "sensor_msgs/msg/JointState",
    "imu": "sensor_msgs/msg/Imu",
    "odom": "nav_msgs/msg/Odometry",
    "cmd_vel": "geometry_msgs/msg/Twist",
    "joint_commands": "std_msgs/msg/Float64MultiArray",
    "policy_step": POLICY_STEP_TYPE,
    "metadata": "std_msgs/msg/String",
}
"""Role → ROS message type."""

METADATA_KEYS = ("task", "robot", "seed", "manifest_sha256", "source")
"""Metadata also stored one by one in metadata.yaml (`custom_data`, as `batonlab.<key>`)."""


def bag_metadata(metadata: dict[str, Any], joint_names, command_joint_names, topics: dict[str, str]) -> dict[str, Any]:
    """A bag's complete metadata: the caller's facts (task, robot, seed, …) with the format, the joint
    orders of `/joint_states` and `/joint_commands`, and the topic of each role."""
    return {"format": BAG_FORMAT, **metadata, "joint_names": list(joint_names),
            "command_joint_names": list(command_joint_names), "topics": dict(topics)}


def make_typestore():
    """A rosbags typestore with the ROS 2 Jazzy messages and `batonlab_msgs/msg/PolicyStep`."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS2_JAZZY)
    store.register(get_types_from_msg(POLICY_STEP_MSG, POLICY_STEP_TYPE))
    return store


def metadata_json(metadata: dict[str, Any]) -> str:
    """The metadata as JSON (numpy arrays become lists)."""
    return json.dumps(metadata, default=_json_default, sort_keys=True)


def _json_default(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")
