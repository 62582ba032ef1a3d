# SPDX-License-Identifier: BSD-3-Clause
"""`policy_node`'s parameters, and the configuration they turn into (`SafetyCfg`, the cmd_vel command).

Design and contract notes: docs/modules/deploy_ros.node_params.md.
"""

from __future__ import annotations

import numpy as np
from rcl_interfaces.msg import ParameterDescriptor

from batonlab.deploy import ManifestError, SafetyCfg, load_manifest
from batonlab.deploy.safety_params import SAFETY_PARAMETERS, safety_cfg_from_params
from batonlab.deploy.wiring import WiringError, twist_lacking_fields
from deploy_ros.messages import twist_to_command, twist_to_vector

PARAMETERS = {
    "manifest": "",  # manifest.json or the export folder holding it and policy.onnx
    "verify_hash": True,  # check policy.onnx against the manifest's sha256
    "control_rate_hz": 0.0,  # 0: the manifest's control rate
    "joint_states_topic": "joint_states",
    "imu_topic": "imu",
    "cmd_vel_topic": "cmd_vel",
    "estop_topic": "estop",
    "odom_topic": "odom",  # nav_msgs/Odometry, recorded with record:=true (not a policy input)
    "command_topic": "joint_commands",  # one interface: its topic (e.g. /forward_position_controller/commands);
    # several: the prefix of the defaults of command_topics.<interface> (declared per interface)
    "trajectory_topic": "joint_trajectory",  # e.g. /joint_trajectory_controller/joint_trajectory
    "output": "forward",  # forward (Float64MultiArray) | trajectory (JointTrajectory, position joints only) | both
    "command_joint_order": [""],  # one interface: joint order of the forward controller; empty: the command vector's
    # (several interfaces: command_joint_orders.<interface>, declared per interface)
    "ignored_joints": [""],  # robot joints the policy does not use (gripper, head …)
    "cmd_vel_command": "auto",  # manifest command fed by cmd_vel; auto: the one with a lin_vel_x field; "": none
    "cmd_vel_timeout_s": 0.5,  # cmd_vel falls back to the command's default after this
    # The safety filter: one parameter per SafetyCfg field (0.0 or "" where the field's default is None);
    # stop_pose.<joint>: crouch target of a position joint [rad or m], over the manifest's stop pose (declared per joint)
    **{param.name: param.default for param in SAFETY_PARAMETERS},
    "estop_mode": "latch",  # latch (true stops) | heartbeat (stop unless false arrives every estop_heartbeat_timeout_s)
    "diagnostics_rate_hz": 2.0,
    "graph_check_rate_hz": 1.0,  # how often publishers on the input topics are checked
    "realtime_priority": 0,  # 1-99: run the node's threads under SCHED_FIFO at this priority (0: normal scheduling)
    "record": False,  # write a rosbag2 (MCAP) bag of inputs, policy steps and commands
    "record_dir": "bags",  # bags go to <record_dir>/<task>_<date-time>
    "record_robot": "",  # robot name stored in the bag's metadata
    "record_seed": -1,  # seed stored in the bag's metadata (sim-to-sim episodes); -1: none
}
"""Parameters and their defaults (config/policy_node.yaml documents them for a robot)."""

DESCRIPTIONS = {param.name: param.description for param in SAFETY_PARAMETERS}
"""Descriptions declared with the parameters: the safety parameters', from `SafetyCfg`'s field docstrings."""


class RefusedToStart(RuntimeError):
    """The node cannot run this policy on this robot (bad manifest, joint mismatch, bad output configuration)."""


def declare_parameters(node) -> dict:
    """Every parameter of `PARAMETERS` declared on `node`, by name; empty strings dropped from the joint lists."""
    p = {name: node.declare_parameter(name, default, ParameterDescriptor(description=DESCRIPTIONS.get(name, ""))).value
         for name, default in PARAMETERS.items()}
    for key in ("command_joint_order", "ignored_joints"):
        p[key] = [s for s in p[key] if s]
    return p


def load_policy_manifest(p: dict):
    """The manifest named by the `manifest` parameter (its policy.onnx checked unless `verify_hash` is off).

    Raises:
        RefusedToStart: no manifest, an invalid one, or a policy.onnx that does not match it.
    """
    try:
        return load_manifest(p["manifest"], verify_hash=p["verify_hash"])
    except ManifestError as err:
        raise RefusedToStart(str(err)) from None


def safety_cfg(node, p: dict, manifest) -> SafetyCfg:
    """The runtime's safety settings from the parameters (declares `stop_pose.<joint>` on `node`).

    Raises:
        RefusedToStart: an unknown `estop_mode`, a `stop_pose` of a joint the node does not command,
            or settings `SafetyCfg` rejects.
    """
    if p["estop_mode"] not in ("latch", "heartbeat"):
        raise RefusedToStart(f"estop_mode must be 'latch' or 'heartbeat', got '{p['estop_mode']}'")
    try:
        return safety_cfg_from_params(p, p["estop_mode"] == "heartbeat", stop_pose(node, manifest))
    except ValueError as err:
        raise RefusedToStart(str(err)) from None


def stop_pose(node, manifest) -> dict[str, float] | None:
    """The crouch pose: the manifest's, with the joints set by `stop_pose.<joint>` parameters; None: the manifest's."""
    joints = (*manifest.joint_names, *manifest.held_joints.names)
    overrides = {}
    for name in joints:
        value = node.declare_parameter(f"stop_pose.{name}", float("nan"), ParameterDescriptor(dynamic_typing=True)).value
        if value is not None and np.isfinite(float(value)):
            overrides[name] = float(value)
    # A misspelt joint would be ignored silently by ROS (undeclared parameter): a safety setting must not be.
    unknown = sorted(k[len("stop_pose."):] for k in node._parameter_overrides
                     if k.startswith("stop_pose.") and k[len("stop_pose."):] not in joints)
    if unknown:
        raise RefusedToStart(f"stop_pose names joints {unknown} that the node does not command {list(joints)}")
    return {**manifest.stop.pose, **overrides} if overrides else None


def cmd_vel_command(manifest, name: str):
    """(command fed by cmd_vel or "", Twist → values, the command's fallback value) for the `cmd_vel_command` parameter.

    Raises:
        RefusedToStart: the command is unknown, or a Twist cannot feed it.
    """
    commands = manifest.commands
    if name == "auto":
        candidates = [n for n, c in commands.items() if "lin_vel_x" in c.fields]
        name = candidates[0] if len(candidates) == 1 else ""
    if not name:
        return "", None, None
    if name not in commands:
        raise RefusedToStart(f"cmd_vel_command '{name}' is not a command of the manifest {list(commands)}")
    spec = commands[name]
    if not spec.fields:
        # Older manifests name no fields: map by width, and stand still (zeros) without a Twist.
        if spec.dim not in (2, 3, 6):
            raise RefusedToStart(f"cmd_vel cannot feed the command '{name}' of width {spec.dim} (2, 3 or 6)")
        return name, lambda msg: twist_to_vector(msg, spec.dim), list(spec.default or [0.0] * spec.dim)
    try:
        twist_lacking_fields(name, spec.fields, spec.default is not None)
    except WiringError as err:
        raise RefusedToStart(str(err)) from None
    default = list(spec.default) if spec.default is not None else [0.0] * spec.dim
    return name, lambda msg: twist_to_command(msg, spec.fields, default), default
