# SPDX-License-Identifier: BSD-3-Clause
"""How a policy's joints and commands meet a robot's topics, without ROS: command interfaces and Twist fields."""

from __future__ import annotations

from collections.abc import Sequence

POSITION, VELOCITY, EFFORT = "position", "velocity", "effort"
"""What a joint's target is: a PD position target [rad or m], a velocity [rad/s] or a torque [N·m]."""

INTERFACES = (POSITION, VELOCITY, EFFORT)
"""ros2_control command interfaces, in the order a robot lists them."""

ACTION_INTERFACES = {"joint_position": POSITION, "joint_velocity": VELOCITY, "joint_effort": EFFORT, "ik_residual": POSITION,
                     "tool_step": POSITION}
"""Action term type (manifest `actions[].type`, training `action_type`) → the command interface of its joints."""

TWIST_FIELDS: dict[str, tuple[str, str]] = {
    "lin_vel_x": ("linear", "x"),
    "lin_vel_y": ("linear", "y"),
    "lin_vel_z": ("linear", "z"),
    "ang_vel_x": ("angular", "x"),
    "ang_vel_y": ("angular", "y"),
    "ang_vel_z": ("angular", "z"),
}
"""Command field → (Twist part, axis) [m/s, rad/s]; other fields are not carried by a Twist."""


class WiringError(ValueError):
    """A joint or command cannot be wired as asked."""


def command_interface(action_type: str) -> str:
    """The command interface of the joints of an action term of `action_type`."""
    try:
        return ACTION_INTERFACES[action_type]
    except KeyError:
        raise WiringError(f"action type '{action_type}' drives no joint interface; joint action types: "
                          f"{list(ACTION_INTERFACES)}") from None


def group_by_interface(joints: Sequence[str], interfaces: Sequence[str]) -> dict[str, list[str]]:
    """Interface → its joints (in `joints` order), interfaces in `INTERFACES` order, only those used."""
    return {kind: [j for j, k in zip(joints, interfaces) if k == kind] for kind in INTERFACES if kind in interfaces}


def twist_lacking_fields(command: str, fields: Sequence[str], has_default: bool) -> list[str]:
    """Fields of `command` a Twist cannot carry (they keep the command's default).

    Raises:
        WiringError: no field is carried by a Twist, or some are not and the command has no default.
    """
    if not any(f in TWIST_FIELDS for f in fields):
        raise WiringError(f"cmd_vel_command '{command}' has no field a Twist carries: {list(fields)} "
                          f"(a Twist carries {list(TWIST_FIELDS)})")
    lacking = [f for f in fields if f not in TWIST_FIELDS]
    if lacking and not has_default:
        raise WiringError(f"cmd_vel_command '{command}': a Twist cannot carry {lacking} and the command has no default")
    return lacking
