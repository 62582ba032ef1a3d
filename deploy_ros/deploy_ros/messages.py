# SPDX-License-Identifier: BSD-3-Clause
"""Topic conventions shared by `policy_node` and `sim_robot_node`.

Sensors and task commands the policy reads are exchanged by their manifest names:

- sensor `<name>` on `sensors/<name>`, task command `<name>` on `commands/<name>`;
- 3-vectors (points in the robot base frame, e.g. the tool point `ee_pos_b` or a reach target)
  as `geometry_msgs/PointStamped`, anything else as `std_msgs/Float64MultiArray`;
- pose sensors (the manifest's "pose" sensors, e.g. a perception node's `object_pose`) as
  `geometry_msgs/PoseStamped`: the vector (x, y, z, qw, qx, qy, qz) of `batonlab.deploy.pose`, i.e.
  pose.position then pose.orientation with w first (the message stores x, y, z, w);
- a velocity command can instead come from `cmd_vel` (`geometry_msgs/Twist`): its fields (the
  command term's `fields`) map by name onto the Twist (`TWIST_FIELDS`: lin_vel_x → linear.x,
  lin_vel_y → linear.y, ang_vel_z → angular.z, …); fields a Twist cannot carry (a base height) take
  the command's default (`twist_to_command`), and the sim robot fixes them there.
"""

from __future__ import annotations

from collections.abc import Sequence

from geometry_msgs.msg import PointStamped, PoseStamped, Twist
from std_msgs.msg import Float64MultiArray
from std_msgs.msg import MultiArrayDimension

from batonlab.deploy.wiring import TWIST_FIELDS  # noqa: F401  (re-exported for the nodes)


def vector_msg_type(dim: int):
    """Message type carrying a vector input of width `dim`."""
    return PointStamped if dim == 3 else Float64MultiArray


def input_msg_type(dim: int, pose: bool = False):
    """Message type carrying an input of width `dim` (a pose sensor: PoseStamped)."""
    return PoseStamped if pose else vector_msg_type(dim)


def pose_to_msg(values: Sequence[float], stamp=None, frame_id: str = "") -> PoseStamped:
    """A pose (x, y, z [m], qw, qx, qy, qz) as a PoseStamped in `frame_id`."""
    msg = PoseStamped()
    if stamp is not None:
        msg.header.stamp = stamp
    msg.header.frame_id = frame_id
    p, o = msg.pose.position, msg.pose.orientation
    p.x, p.y, p.z, o.w, o.x, o.y, o.z = (float(v) for v in values)
    return msg


def vector_to_msg(values: Sequence[float], stamp=None, frame_id: str = ""):
    """A vector as the message `vector_msg_type(len(values))`."""
    if len(values) == 3:
        msg = PointStamped()
        if stamp is not None:
            msg.header.stamp = stamp
        msg.header.frame_id = frame_id
        msg.point.x, msg.point.y, msg.point.z = (float(v) for v in values)
        return msg
    return float_array(values)


def msg_to_vector(msg) -> list[float]:
    """The values of a PointStamped (3), PoseStamped (7: x, y, z, qw, qx, qy, qz), Twist (6) or multi-array message."""
    if isinstance(msg, PointStamped):
        return [msg.point.x, msg.point.y, msg.point.z]
    if isinstance(msg, PoseStamped):
        p, o = msg.pose.position, msg.pose.orientation
        return [p.x, p.y, p.z, o.w, o.x, o.y, o.z]
    if isinstance(msg, Twist):
        return twist_to_vector(msg, 6)
    return list(msg.data)


def twist_to_vector(msg: Twist, dim: int) -> list[float]:
    """Twist → command: 2 = (vx, wz), 3 = (vx, vy, wz), 6 = (vx, vy, vz, wx, wy, wz) [m/s, rad/s]."""
    lin, ang = msg.linear, msg.angular
    if dim == 2:
        return [lin.x, ang.z]
    if dim == 3:
        return [lin.x, lin.y, ang.z]
    if dim == 6:
        return [lin.x, lin.y, lin.z, ang.x, ang.y, ang.z]
    raise ValueError(f"cmd_vel cannot feed a command of width {dim} (2, 3 or 6)")




def command_to_twist(fields: Sequence[str], values: Sequence[float]) -> Twist:
    """A command (its `fields` and `values`) as a Twist; fields not in `TWIST_FIELDS` are left out."""
    msg = Twist()
    for field, value in zip(fields, values):
        if field in TWIST_FIELDS:
            part, axis = TWIST_FIELDS[field]
            setattr(getattr(msg, part), axis, float(value))
    return msg


def twist_to_command(msg: Twist, fields: Sequence[str], defaults: Sequence[float] | None) -> list[float]:
    """A Twist as the command of `fields`; fields a Twist cannot carry take their value in `defaults`
    (the command term's `default_value()`, aligned with `fields`).

    Raises:
        ValueError: a field a Twist cannot carry and no default for it.
    """
    values = []
    for k, field in enumerate(fields):
        if field in TWIST_FIELDS:
            part, axis = TWIST_FIELDS[field]
            values.append(float(getattr(getattr(msg, part), axis)))
        elif defaults is not None:
            values.append(float(defaults[k]))
        else:
            raise ValueError(f"a Twist cannot carry the command field '{field}' and the command has no default")
    return values


def float_array(values: Sequence[float], label: str = "") -> Float64MultiArray:
    """The values as a Float64MultiArray, with one dimension labelled `label` when given."""
    msg = Float64MultiArray()
    if label:
        msg.layout.dim = [MultiArrayDimension(label=label, size=len(values), stride=len(values))]
    msg.data = [float(v) for v in values]
    return msg
