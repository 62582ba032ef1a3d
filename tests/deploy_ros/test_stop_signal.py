# SPDX-License-Identifier: BSD-3-Clause
"""The deploy nodes stop on SIGINT through rclpy alone: no KeyboardInterrupt is raised anywhere (one
raised inside a finaliser once printed a traceback from a clean stop of sim_robot_node)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")

from batonlab.cli.deploy import ros_environment  # noqa: E402
from ros.nodes import NodeProcess, new_domain_id  # noqa: E402

SPINNER = """
import signal, sys, rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.task import Future
from deploy_ros.stop_signal import spin_until_stopped, stop_through_rclpy

if sys.argv[2] == "stop_through_rclpy":
    stop_through_rclpy()
else:  # Python's handler, also where SIGINT came in ignored (a background job of a shell ignores it)
    signal.signal(signal.SIGINT, signal.default_int_handler)
rclpy.init(domain_id=int(sys.argv[1]))
node = rclpy.create_node("stop_signal_test")
node.create_timer(0.005, lambda: None)
executor = SingleThreadedExecutor()
executor.add_node(node)
print("spinning", flush=True)
try:
    if not spin_until_stopped(executor, Future()):
        print("stopped by rclpy", flush=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
node.destroy_node()
rclpy.try_shutdown()
"""


@pytest.mark.parametrize("handler", ["stop_through_rclpy", "python default"])
def test_sigint_reaches_the_spin_as_a_shutdown_not_a_keyboard_interrupt(handler):
    """With the nodes' handler, SIGINT ends the spin as rclpy's shutdown; with Python's default it raises
    KeyboardInterrupt, which can land anywhere (the control case shows the test can tell them apart).

    The control installs Python's handler itself: a process started with SIGINT ignored (pytest as
    a background job of a non-interactive shell) passes that on, Python then installs none, and the
    control saw no interrupt in 3 of 3 tries."""

    domain = new_domain_id()
    process = subprocess.Popen([sys.executable, "-c", SPINNER, str(domain), handler], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=ros_environment(domain))
    assert process.stdout.readline().strip() == "spinning"
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=30)
    assert process.returncode == 0, output
    if handler == "stop_through_rclpy":
        assert "stopped by rclpy" in output and "KeyboardInterrupt" not in output, output
    else:
        assert "KeyboardInterrupt" in output, output


RACE = """
import sys, rclpy
from rclpy.task import Future
from deploy_ros.stop_signal import spin_until_stopped

class ShutDownBeforeItsWaitSet:
    # The SIGINT race, made certain: the context is shut down after the executor's own check, so
    # building the wait set fails as rclpy's does (its RCLError is a RuntimeError).
    def spin_until_future_complete(self, future):
        rclpy.shutdown()
        raise RuntimeError("failed to initialize wait set: the given context is not valid")

class FailsWhileRunning:
    def spin_until_future_complete(self, future):
        raise RuntimeError("a callback failed")

rclpy.init(domain_id=int(sys.argv[1]))
try:
    spin_until_stopped(FailsWhileRunning(), Future())
except RuntimeError as err:
    print("propagated:", err, flush=True)
print("stopped" if spin_until_stopped(ShutDownBeforeItsWaitSet(), Future()) is False else "not stopped", flush=True)
"""


def test_a_shutdown_between_the_executors_check_and_its_wait_set_is_a_stop():
    """CI once saw the spin end in "failed to initialize wait set: the given context is not valid": a SIGINT
    that lands between rclpy's context check and its wait set. That is a stop; any other RuntimeError is not."""
    domain = new_domain_id()
    result = subprocess.run([sys.executable, "-c", RACE, str(domain)], capture_output=True, text=True, timeout=60,
                            env=ros_environment(domain))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == ["propagated: a callback failed", "stopped"], result.stdout + result.stderr


def test_sim_robot_node_stops_on_sigint_with_exit_0_and_no_traceback(tmp_path):
    state_file = tmp_path / "state.npz"
    node = NodeProcess("sim_robot_node", new_domain_id(), tmp_path,
                       params={"task": "arm_reach", "num_episodes": 0, "warmup_s": 0.2, "state_file": str(state_file)})
    deadline = time.monotonic() + 120
    while "joints at" not in node.output:  # its start-up line: the physics timer runs from here
        assert time.monotonic() < deadline and node.process.poll() is None, node.output
        time.sleep(0.1)
    time.sleep(1.0)
    node.process.send_signal(signal.SIGINT)
    code = node.wait(60)
    output = node.output
    node.stop()
    assert code == 0, output
    assert "Traceback" not in output and "KeyboardInterrupt" not in output, output
    assert state_file.exists(), "the cleanup ran to its end"
    assert "start-up objects frozen out of the garbage collector" in output, output


HANG = """
import re, sys, time
from deploy_ros.stop_signal import teardown_deadline

with teardown_deadline(1):
    if sys.argv[1] == "hang":
        # Catastrophic backtracking: the regex engine runs in C for minutes without releasing the GIL, as
        # Fast DDS's participant teardown was seen doing inside destroy_node.
        re.match(r"(a+)+$", "a" * 40 + "!")
time.sleep(1.5)  # past the deadline: it was disarmed
print("alive", flush=True)
"""


@pytest.mark.parametrize("body", ["hang", "quick"])
def test_a_teardown_that_hangs_holding_the_gil_is_ended_by_the_deadline(body):
    """The nodes' rclpy teardown runs under `teardown_deadline`: a hang in C code that holds the GIL (no Python
    handler could run) ends the process with SIGALRM; a teardown that finishes in time leaves the process alive."""
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-c", HANG, body], capture_output=True, text=True, timeout=60,
                            env=ros_environment(new_domain_id()))
    if body == "hang":
        assert result.returncode == -signal.SIGALRM, result.stdout + result.stderr
        assert time.monotonic() - start < 30
    else:
        assert result.returncode == 0 and result.stdout.strip() == "alive", result.stdout + result.stderr


DEAF_CHILD = """
import signal, sys, rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions
from rclpy.task import Future
from batonlab.deploy import parent
from deploy_ros.stop_signal import spin_until_stopped, stop_when_parent_dies

signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the parent-death signal lost, as seen during rclpy's start-up
rclpy.init(domain_id=int(sys.argv[1]), signal_handler_options=SignalHandlerOptions.NO)
watch = stop_when_parent_dies(parent.bound_parent(), 0.1)
node = rclpy.create_node("parent_watch_test")
executor = SingleThreadedExecutor()
executor.add_node(node)
print("spinning" if watch is not None else "not bound", flush=True)
print("stopped" if not spin_until_stopped(executor, Future()) else "done", flush=True)
"""

CHILD_ORPHANED_IN_START_UP = """
import os, signal, sys, time, rclpy
from rclpy.task import Future
from batonlab.deploy import parent
from deploy_ros import stop_signal

signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the parent-death signal lost
start_up = rclpy.init


def slow_init(*args, **kwargs):
    print("starting up", flush=True)
    bound = int(os.environ[parent.PARENT_PID_ENV])
    while not parent.parent_gone(bound):  # the parent is killed while rclpy starts up
        time.sleep(0.05)
    start_up(*args, **kwargs)


rclpy.init = slow_init
code = stop_signal.run_node("orphan", lambda: rclpy.create_node("orphan_test"), (), lambda node: Future())
print("stopped" if code == 0 else f"exit {code}", flush=True)
"""

PARENT = """
import subprocess, sys, time
from batonlab.cli.children import start_child

child = start_child([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdout=open(sys.argv[3], "w"),
                    stderr=subprocess.STDOUT)
print(child.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("when", ["while it spins", "while rclpy starts up"])
def test_a_node_whose_parent_died_stops_even_when_the_parent_death_signal_is_lost(when, tmp_path):
    """`batonlab deploy` SIGKILLed: its node ends although the kernel's SIGTERM did nothing (ignored here), because
    the node watches its parent (`stop_when_parent_dies`); also when the parent dies while rclpy starts up in
    `run_node`, which reads its parent before."""
    domain, log = new_domain_id(), tmp_path / "child.log"
    child_code, ready = (DEAF_CHILD, "spinning") if when == "while it spins" else (CHILD_ORPHANED_IN_START_UP,
                                                                                    "starting up")
    parent = subprocess.Popen([sys.executable, "-c", PARENT, child_code, str(domain), str(log)], stdout=subprocess.PIPE,
                              text=True, env=ros_environment(domain))
    child = int(parent.stdout.readline())
    deadline = time.monotonic() + 60
    while ready not in (log.read_text() if log.exists() else ""):
        assert time.monotonic() < deadline and "not bound" not in log.read_text(), log.read_text()
        time.sleep(0.1)
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while Path(f"/proc/{child}").exists() and _state(child) != "Z" and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = Path(f"/proc/{child}").exists() and _state(child) != "Z"
    if alive:
        os.kill(child, signal.SIGKILL)
    assert not alive, f"the node ran on 10 s after its parent died: {log.read_text()}"
    assert log.read_text().splitlines()[-1] == "stopped", log.read_text()


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "X"
    return stat[stat.rindex(")") + 2]
