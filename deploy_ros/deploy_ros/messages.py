# SPDX-License-Identifier: BSD-3-Clause
"""Topic conventions shared by `policy_node` and `sim_robot_node`.

Sensors and task commands the policy reads are exchanged by their manifest names:

- sensor `<name>` on `sensors/<name>`, task command `<name>` on `commands/<name>`;
- 3-vectors (points in the robot base frame, e.g. the tool point `ee_pos_b` or a reach target)
  as `geometry_msgs/PointStamped`, anything else as `std_msgs/Float64MultiArray`;
- a velocity command can instead come from `cmd_vel` (`geometry_msgs/Twist`).
"""

from __future__ import annotations

from collections.abc import Sequence

from geometry_msgs.msg import PointStamped, Twist
from std_msgs.msg import Float64MultiArray
from std_msgs.msg import MultiArrayDimension


def vector_msg_type(dim: int):
    """Message type carrying a vector input of width `dim`."""
    return PointStamped if dim == 3 else Float64MultiArray


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
    if isinstance(msg, PointStamped):
        return [msg.point.x, msg.point.y, msg.point.z]
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


def float_array(values: Sequence[float], label: str = "") -> Float64MultiArray:
    msg = Float64MultiArray()
    if label:
        msg.layout.dim = [MultiArrayDimension(label=label, size=len(values), stride=len(values))]
    msg.data = [float(v) for v in values]
    return msg
