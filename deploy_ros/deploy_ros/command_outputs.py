# SPDX-License-Identifier: BSD-3-Clause
"""`policy_node`'s command vector as ROS messages: one Float64MultiArray per interface, and/or a JointTrajectory.

Design and contract notes: docs/modules/deploy_ros.command_outputs.md.
"""

from __future__ import annotations

import numpy as np
from rclpy.qos import QoSProfile
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

from batonlab.deploy.actions import POSITION
from deploy_ros.messages import float_array
from deploy_ros.node_params import RefusedToStart


class CommandOutputs:
    """The command messages of one policy: their topics and joint orders, then (`advertise`) their publishers."""

    def __init__(self, node, p: dict, joint_names, command_kinds, period_s: float):
        """Topics and joint orders from the parameters (declares `command_topics.<I>`, `command_joint_orders.<I>`).

        Raises:
            RefusedToStart: a joint order that is not a permutation of its interface's joints,
                `command_joint_order` with several interfaces, or a trajectory output for velocity or effort joints.
        """
        self.outputs = forward_outputs(node, p, joint_names, command_kinds)
        """(interface, topic, joint order) of each Float64MultiArray the node publishes."""
        names = list(joint_names)
        self._index = [np.array([names.index(n) for n in order]) for _, _, order in self.outputs]
        if p["output"] in ("trajectory", "both") and set(command_kinds) != {POSITION}:
            others = [n for n, k in zip(names, command_kinds) if k != POSITION]
            raise RefusedToStart(f"output '{p['output']}' sends positions only (trajectory_msgs/JointTrajectory), but the "
                                 f"policy commands {others} by velocity or effort: use output:=forward")
        self.joint_order = self.outputs[0][2] if len(self.outputs) == 1 else names
        """The recorded joint_commands vector: the one output's order, else the command vector's."""
        self.record_index = np.array([names.index(n) for n in self.joint_order])
        """Command vector → `joint_order`."""
        self.period_s = period_s
        self.output = p["output"]
        self.trajectory_topic = p["trajectory_topic"]
        self.forward: list = []
        """One Float64MultiArray publisher per entry of `outputs` (output forward or both)."""
        self.trajectory = None
        """The JointTrajectory publisher (output trajectory or both)."""

    def advertise(self, node, qos: QoSProfile) -> None:
        """Create the publishers the `output` parameter asks for.

        Raises:
            RefusedToStart: `output` is not forward, trajectory or both.
        """
        if self.output not in ("forward", "trajectory", "both"):
            raise RefusedToStart(f"output must be forward, trajectory or both, got '{self.output}'")
        self.forward = ([node.create_publisher(Float64MultiArray, topic, qos) for _, topic, _ in self.outputs]
                        if self.output in ("forward", "both") else [])
        self.trajectory = (node.create_publisher(JointTrajectory, self.trajectory_topic, qos)
                           if self.output in ("trajectory", "both") else None)

    def publish(self, command: np.ndarray) -> None:
        """The command vector (`runtime.joint_names` order) as one message per interface (and/or a trajectory)."""
        for pub, idx in zip(self.forward, self._index):
            pub.publish(float_array(command[idx]))
        if self.trajectory is not None:  # a single, position interface
            msg = JointTrajectory()
            msg.joint_names = list(self.outputs[0][2])
            point = JointTrajectoryPoint()
            point.positions = command[self._index[0]].tolist()
            point.time_from_start.nanosec = int(self.period_s * 1e9)
            msg.points = [point]
            self.trajectory.publish(msg)

    def describe(self) -> str:
        """What goes where, for the start-up log line."""
        text = "; ".join(f"{kind} {order} on {topic}" for kind, topic, order in self.outputs) if self.forward else ""
        if self.trajectory is not None:
            text += ("; " if text else "") + f"trajectory on {self.trajectory_topic}"
        return text


def forward_outputs(node, p: dict, joint_names, command_kinds) -> list[tuple[str, str, list[str]]]:
    """(interface, topic, joint order) per command message (see the module docstring)."""
    interfaces: dict[str, list[str]] = {}
    for name, kind in zip(joint_names, command_kinds):
        interfaces.setdefault(kind, []).append(name)
    if len(interfaces) == 1:
        (kind, joints), = interfaces.items()
        order = p["command_joint_order"] or joints
        if sorted(order) != sorted(joints):
            raise RefusedToStart(f"command_joint_order {order} must be a permutation of the commanded joints {joints}")
        return [(kind, p["command_topic"], order)]
    if p["command_joint_order"]:
        raise RefusedToStart(f"the policy commands several interfaces {list(interfaces)}: set command_joint_orders."
                             "<interface> instead of command_joint_order")
    outputs = []
    for kind, joints in interfaces.items():
        topic = node.declare_parameter(f"command_topics.{kind}", f"{p['command_topic']}/{kind}").value
        order = [s for s in node.declare_parameter(f"command_joint_orders.{kind}", [""]).value if s] or joints
        if sorted(order) != sorted(joints):
            raise RefusedToStart(f"command_joint_orders.{kind} {order} must be a permutation of the {kind} joints {joints}")
        outputs.append((kind, topic, order))
    return outputs
