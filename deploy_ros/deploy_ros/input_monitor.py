# SPDX-License-Identifier: BSD-3-Clause
"""Who publishes on `policy_node`'s input topics, and why a publisher's messages would not arrive.

DDS drops messages between a publisher and a subscription whose QoS or type do not match, and says
so only once, at discovery. For a safety input (the e-stop) or a required one (the reach target)
that silence is dangerous: the node must say which publisher it cannot hear and why. The monitor
combines two sources: the subscription's own events (incompatible QoS or type, reported by the
middleware when the pair is discovered) and a periodic look at the ROS graph (every publisher's
type and offered QoS, checked against the subscription's).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from rclpy.event_handler import SubscriptionEventCallbacks
from rclpy.qos import QoSCompatibility, QoSProfile, qos_check_compatible


def type_name(msg_type) -> str:
    """`sensor_msgs/msg/JointState` for the Python class of that message."""
    return f"{msg_type.__module__.split('.')[0]}/msg/{msg_type.__name__}"


@dataclass
class WatchedInput:
    name: str
    topic: str
    """Fully qualified topic name."""
    type_name: str
    qos: QoSProfile
    required: bool
    publishers: int = 0
    matched: int = 0
    problems: list[str] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    """Incompatibilities the middleware reported (kept: a publisher that went away may come back)."""


class InputMonitor:
    """Per input topic: publishers, matched publishers and the reasons for any that cannot be heard."""

    def __init__(self, node):
        self.node = node
        self.inputs: dict[str, WatchedInput] = {}
        self._lock = threading.Lock()

    def watch(self, name: str, topic: str, msg_type, qos: QoSProfile, required: bool) -> SubscriptionEventCallbacks:
        """Register an input; returns the event callbacks to pass to `create_subscription`."""
        watched = WatchedInput(name, self.node.resolve_topic_name(topic), type_name(msg_type), qos, required)
        self.inputs[name] = watched

        def on_incompatible_qos(info) -> None:
            policy = getattr(info.last_policy_kind, "name", str(info.last_policy_kind)).replace("RMW_QOS_POLICY_", "")
            self._event(watched, f"{watched.topic}: a publisher offers incompatible QoS ({policy}); its messages are dropped")

        def on_incompatible_type(info) -> None:
            self._event(watched, f"{watched.topic}: a publisher sends another message type than {watched.type_name}; "
                                 "its messages are dropped")

        def on_matched(info) -> None:
            with self._lock:
                watched.matched = int(info.current_count)

        return SubscriptionEventCallbacks(incompatible_qos=on_incompatible_qos, incompatible_type=on_incompatible_type,
                                          matched=on_matched)

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
            with self._lock:
                if not problems and len(infos) > watched.matched:
                    problems = list(watched.events)  # unheard publishers the graph cannot explain
                watched.publishers = len(infos)
                if problems != watched.problems:
                    watched.problems, changed = problems, True
        return changed

    def problems(self) -> list[str]:
        with self._lock:
            return [p for w in self.inputs.values() for p in w.problems]

    def describe(self, name: str) -> str:
        """`topic (N publishers)` with the problems, for messages that name an input."""
        watched = self.inputs.get(name)
        if watched is None:
            return name
        text = f"{watched.topic} ({watched.publishers} publisher{'s' if watched.publishers != 1 else ''})"
        return text + (": " + "; ".join(watched.problems) if watched.problems else "")

    def report(self) -> dict[str, dict]:
        with self._lock:
            return {w.name: {"topic": w.topic, "publishers": w.publishers, "matched": w.matched, "problems": list(w.problems)}
                    for w in self.inputs.values()}

    def _event(self, watched: WatchedInput, text: str) -> None:
        with self._lock:
            if text not in watched.events:
                watched.events.append(text)
        self.node.get_logger().error(text)
