# SPDX-License-Identifier: BSD-3-Clause
"""`sim_robot_node lockstep:=true` over DDS, driven from this process as a slow controller would drive it.

The simulator's /clock is the proof: while a control period waits for its command, no later simulated
time may go out; a controller that goes silent costs one `lockstep_timeout_s`, after which the robot
runs on the wall clock; the next command brings the wait back; and a controller that answers at once
drives the simulation faster than the wall clock would pace it.
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import pytest

from batonlab.tasks import make_task_cfg

PHYSICS_DT = float(make_task_cfg("arm_reach").sim.physics_dt)
DECIMATION = int(make_task_cfg("arm_reach").sim.decimation)
CONTROL_DT = PHYSICS_DT * DECIMATION
TIMEOUT_S = 0.6
REPLY_DELAY_S = 0.1
"""The controller answers each period this long after its state went out (5 physics steps' worth of wall time
at real time: without lockstep the sim would have run 20 physics steps on the old targets)."""


def is_period_start(t: float) -> bool:
    return round(t / PHYSICS_DT) % DECIMATION == 0


def controller_class():
    """A controller on the sim robot's DDS domain (built here: rclpy is an optional dependency).

    It records (wall time, simulated time) of every /clock message, sends arm_reach joint commands and,
    given `state_topic`, publishes policy states there."""
    from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
    from rosgraph_msgs.msg import Clock
    from std_msgs.msg import Float64MultiArray, String

    from ros.nodes import DdsPeer

    class Controller(DdsPeer):
        def __init__(self, domain_id: int, state_topic: str | None = None):
            self._open_node(domain_id, "slow_controller")
            self.clock: list[tuple[float, float]] = []
            self.node.create_subscription(Clock, "/clock", self._on_clock,
                                          QoSProfile(depth=1000, reliability=ReliabilityPolicy.RELIABLE))
            self.commands = self.node.create_publisher(Float64MultiArray, "joint_commands", 10)
            # A policy node's ~/state as sim_robot_node follows it (RELIABLE, TRANSIENT_LOCAL).
            latched = QoSProfile(depth=20, reliability=ReliabilityPolicy.RELIABLE,
                                 durability=DurabilityPolicy.TRANSIENT_LOCAL)
            self.state = self.node.create_publisher(String, state_topic, latched) if state_topic else None
            self.answering = False
            """Answer every period at once: a command as soon as /clock reaches the period's start."""
            self._spin_in_background()

        def _on_clock(self, msg) -> None:
            t = msg.clock.sec + msg.clock.nanosec * 1e-9
            with self.lock:
                self.clock.append((time.monotonic(), t))
            if self.answering and is_period_start(t):
                self.command()

        def received(self) -> list[tuple[float, float]]:
            with self.lock:
                return list(self.clock)

        def command(self) -> None:
            self.commands.publish(Float64MultiArray(data=[0.0] * 6))

        def stalled_at(self, after: float, timeout: float = 30.0) -> float:
            """The simulated time at which /clock stops, later than `after`: no message for REPLY_DELAY_S."""
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                clock = self.received()
                if clock and clock[-1][1] > after + 1e-9 and time.monotonic() - clock[-1][0] >= REPLY_DELAY_S:
                    return clock[-1][1]
                time.sleep(0.005)
            raise AssertionError(f"the simulator never stopped for a command after {after:.3f} s of simulated time")

        def latest(self) -> float:
            clock = self.received()
            return clock[-1][1] if clock else -1.0

    return Controller


@contextlib.contextmanager
def sim_robot_with_controller(tmp_path, state_topic: str | None = None, **params):
    """sim_robot_node (arm_reach, lockstep, no episodes) in a child process and a `controller_class()` here,
    once /clock runs and the node hears the controller; on exit the node must end cleanly. Yields (node, controller)."""
    from ros.nodes import NodeProcess, new_domain_id

    domain = new_domain_id()
    node = NodeProcess("sim_robot_node", domain, tmp_path, params={"task": "arm_reach", "warmup_s": 1e9, "lockstep": True,
                                                                    **params})
    controller = controller_class()(domain, state_topic)
    publishers = [controller.commands] + ([controller.state] if state_topic else [])
    try:
        deadline = time.monotonic() + 120
        while controller.latest() < 0.5 or not all(pub.get_subscription_count() for pub in publishers):
            assert time.monotonic() < deadline and node.process.poll() is None, f"no /clock:\n{node.output}"
            time.sleep(0.05)
        yield node, controller
    finally:
        controller.close()
        code = node.stop()
    assert code == 0 and "Traceback" not in node.output, node.output


def test_lockstep_waits_for_each_periods_command_and_times_out_when_none_comes(tmp_path):
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    with sim_robot_with_controller(tmp_path, lockstep_timeout_s=TIMEOUT_S) as (node, controller):
        # Before any command the robot runs on its own (a policy's passive phase sends nothing).
        start = controller.latest()
        time.sleep(0.5)
        assert controller.latest() > start + 0.1, "without commands the robot must run on the wall clock"
        controller.command()  # engages lockstep

        # A slow controller: each period holds at its start, with no later simulated time, until its command.
        t = controller.latest()
        for _ in range(5):
            t = controller.stalled_at(t)
            assert is_period_start(t), f"the simulator stopped at {t:.4f} s, inside a control period"
            controller.command()
        waited_at = controller.stalled_at(t)
        assert is_period_start(waited_at) and waited_at == pytest.approx(t + CONTROL_DT, abs=1e-9), \
            f"one command, one period: from {t:.3f} s to {waited_at:.3f} s"

        # Silence: one timeout, then the wall clock drives the robot again.
        time.sleep(TIMEOUT_S + 1.5)
        clock = np.array(controller.received())
        after = clock[clock[:, 1] > waited_at + 1e-9]
        assert len(after), f"the simulator stayed at {waited_at:.3f} s without a command:\n{node.output}"
        stalled_s = after[0, 0] - clock[clock[:, 1] <= waited_at + 1e-9][-1, 0]
        ran_on_s = after[-1, 1] - waited_at
        print(f"\n[lockstep] silent controller: waited {stalled_s:.2f} s (timeout {TIMEOUT_S} s), "
              f"then {ran_on_s:.2f} s of simulated time in the next {after[-1, 0] - after[0, 0]:.2f} s of wall time")
        assert stalled_s >= TIMEOUT_S - 0.05, f"the period ran before its timeout ({stalled_s:.2f} s)"
        assert ran_on_s > 20 * CONTROL_DT, "after the timeout the robot must run on without commands"

        # A command brings the wait back.
        controller.command()
        t = controller.stalled_at(controller.latest())
        assert is_period_start(t), "lockstep did not resume with the next command"
        controller.command()
    output = node.output
    assert "lockstep: no command 0.6 s after the period's state went out" in output


def test_lockstep_does_not_wait_for_a_stopped_policy_and_drops_a_state_that_is_not_json(tmp_path):
    """With `policy_node:=NAME` the wait depends on that node's state: a policy in ramp or run owes each period
    its command; a stopped one does not (it may hold or send nothing), so its robot runs on at once, with no
    timeout. A state message that is not the policy node's JSON (another vendor's node, a typo) is dropped
    with a warning and changes nothing."""
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from std_msgs.msg import String

    with sim_robot_with_controller(tmp_path, state_topic="/fake_policy/state", policy_node="/fake_policy",
                                   lockstep_timeout_s=3.0) as (node, policy):  # 3 s: far from the 1 s bar below
        policy.state.publish(String(data='{"state": "run", "reason": ""}'))
        policy.command()
        t = policy.stalled_at(policy.latest())
        assert is_period_start(t)
        policy.state.publish(String(data="run, but not as JSON"))
        time.sleep(2 * REPLY_DELAY_S)
        assert policy.latest() == pytest.approx(t, abs=1e-9), "a malformed state released the wait"

        policy.state.publish(String(data='{"state": "stop", "reason": "e-stop"}'))
        released = time.monotonic()
        while policy.latest() <= t + 1e-9:
            assert time.monotonic() - released < 1.0, "the robot waited for a stopped policy"
            time.sleep(0.005)
        time.sleep(0.5)
        assert policy.latest() > t + 10 * CONTROL_DT, "a stopped policy's robot runs on"
    output = node.output
    assert "dropped a policy state that is not the policy node's JSON" in output
    assert "lockstep: no command" not in output


def test_lockstep_runs_as_fast_as_the_controller_answers(tmp_path):
    """Paced at `real_time_factor` 0.05 the robot would run 0.05 simulated seconds per wall second; in
    lockstep each period runs as soon as its command is in, so a controller that answers at once
    drives it far faster, every period still waiting for its own command."""
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    paced = 0.05
    with sim_robot_with_controller(tmp_path, real_time_factor=paced, lockstep_timeout_s=5.0) as (node, controller):
        controller.answering = True
        controller.command()  # engages lockstep; from now on every period start is answered
        time.sleep(0.5)
        start_wall, start_sim = time.monotonic(), controller.latest()
        time.sleep(2.0)
        clock = np.array(controller.received())
        rate = (clock[-1, 1] - start_sim) / (time.monotonic() - start_wall)
        controller.answering = False
        periods = clock[clock[:, 1] > start_sim, 1]
        print(f"\n[lockstep] answered at once: {rate:.2f} simulated s per wall s (paced: {paced})")
        assert rate > 10 * paced, f"lockstep ran at {rate:.3f} simulated s per wall s, as if paced by the wall clock"
        steps = np.round(periods / PHYSICS_DT).astype(int)
        assert (np.diff(steps) == 1).all(), "every physics step goes out on /clock, in order"
    assert "lockstep: no command" not in node.output
