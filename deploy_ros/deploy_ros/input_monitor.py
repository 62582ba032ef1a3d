# SPDX-License-Identifier: BSD-3-Clause
"""Who publishes on `policy_node`'s input topics, and why a publisher's messages would not arrive.

DDS drops messages between a publisher and a subscription whose QoS or type do not match, and says
so only once, at discovery. For a safety input (the e-stop) or a required one (the reach target)
that silence is dangerous: the node must say which publisher it cannot hear and why. The monitor
looks at the ROS graph periodically: every publisher on an input topic, its type and its offered
QoS, checked against the subscription's with `rclpy.qos.qos_check_compatible`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rclpy.qos import QoSCompatibility, QoSProfile, qos_check_compatible


def type_name(msg_type) -> str:
    """`sensor_msgs/msg/JointState` for the Python class of that message."""
    return f"{msg_type.__module__.split('.')[0]}/msg/{msg_type.__name__}"


@dataclass
class WatchedInput:
    """One watched input topic: the type and QoS the node reads it with, its publisher count and their problems."""

    name: str
    topic: str
    """Fully qualified topic name."""
    type_name: str
    qos: QoSProfile
    publishers: int = 0
    problems: list[str] = field(default_factory=list)


class InputMonitor:
    """Per input topic: the publishers, and the reasons for any whose messages cannot arrive."""

    def __init__(self, node):
        self.node = node
        self.inputs: dict[str, WatchedInput] = {}

    def watch(self, name: str, topic: str, msg_type, qos: QoSProfile) -> None:
        """Watch the input `name` on `topic` (resolved to its full name), read as `msg_type` with `qos`."""
        self.inputs[name] = WatchedInput(name, self.node.resolve_topic_name(topic), type_name(msg_type), qos)

    def check(self) -> bool:
        """Look at the graph now; returns True when the list of problems changed."""
        changed = False
        for watched in self.inputs.values():
            problems = []
            infos = self.node.get_publishers_info_by_topic(watched.topic)
            for info in infos:
                who = f"{info.node_namespace.rstrip('/')}/{info.node_name}"
                if info.topic_type != watched.type_name:
                    problems.append(f"{watched.topic}: {who} publishes {info.topic_type}, the node reads {watched.type_name}")
                    continue
                compatibility, reason = qos_check_compatible(info.qos_profile, watched.qos)
                if compatibility == QoSCompatibility.ERROR:
                    problems.append(f"{watched.topic}: {who} offers incompatible QoS ({reason.strip()})")
            watched.publishers = len(infos)
            if problems != watched.problems:
                watched.problems, changed = problems, True
        return changed

    def problems(self) -> list[str]:
        """The problems of every watched input, as found by the last `check`."""
        return [p for w in self.inputs.values() for p in w.problems]

    def describe(self, name: str) -> str:
        """`topic (N publishers)` with the problems, for messages that name an input (N counted now, not at the last check)."""
        watched = self.inputs.get(name)
        if watched is None:
            return name
        count = len(self.node.get_publishers_info_by_topic(watched.topic))
        text = f"{watched.topic} ({count} publisher{'s' if count != 1 else ''})"
        return text + (": " + "; ".join(watched.problems) if watched.problems else "")

    def report(self) -> dict[str, dict]:
        """Per input name: its topic, publisher count and problems."""
        return {w.name: {"topic": w.topic, "publishers": w.publishers, "problems": list(w.problems)} for w in self.inputs.values()}
