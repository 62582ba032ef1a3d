# SPDX-License-Identifier: BSD-3-Clause
"""Ctrl-C and `kill -INT` stop a node through rclpy alone, never through a KeyboardInterrupt.

rclpy's own SIGINT handler shuts the context down (the spin then ends with ExternalShutdownException)
and afterwards calls the Python handler that was installed before `rclpy.init`. Python's default one
raises KeyboardInterrupt wherever the interpreter happens to be, finalisers included: a
KeyboardInterrupt inside a `Future.__del__` is "ignored" with a traceback on stderr, from a clean stop
with exit code 0 (seen once in a full test run). Installing a handler that does nothing, before
`rclpy.init`, leaves the stop to rclpy. rclpy puts the default handler back when it shuts down, so
the nodes install this one again for their cleanup (a second Ctrl-C must not kill the process halfway
through writing its state file).

The stop can also surface as an RCLError (a RuntimeError) about an invalid context: rclpy's executor
checks the context, then builds its wait set, and a SIGINT that shuts the context down between the two
makes the wait set fail (seen in CI). `spin_until_stopped` takes both forms as the stop they are.

Tearing the node down can hang in the DDS layer: a node whose peers were killed at the same moment
(their parent `batonlab deploy` SIGKILLed) was seen busy inside `destroy_node`, holding the GIL, for
as long as it was left (CI once; 1 of 11 kills under load here). No Python thread or handler can run
then, so the teardown runs under `teardown_deadline`: an alarm whose default action ends the process.

A node started by `batonlab deploy` ends with it: the kernel's parent-death SIGTERM (`children`) stops it
through rclpy, but one that came while rclpy was starting up was seen lost (the node spun on, 1 of 40
kills under load), so the node also watches its parent (`stop_when_parent_dies`). Which parent is read before
rclpy starts up: read after it, a parent that died during the start-up (its signal lost) was no longer the parent,
and nothing watched (CI once: policy_node ran on after `batonlab deploy` was SIGKILLed).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable

import rclpy
from rclpy.exceptions import NotInitializedException
from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor

from batonlab.deploy import parent


PARENT_POLL_S = 0.5
"""How often a node started by `batonlab deploy` checks that deploy is still there [s]."""

TEARDOWN_DEADLINE_S = 5
"""Longest a node's rclpy teardown (executor, node, context) may take before the kernel ends the process [s]."""


def stop_through_rclpy() -> None:
    """Call before `rclpy.init` in a node's main thread, and again once rclpy has shut down."""
    signal.signal(signal.SIGINT, _leave_it_to_rclpy)


def spin_until_stopped(executor, future) -> bool:
    """Spin `executor` until `future` is done (True) or rclpy is shut down by a stop signal (False).

    A RuntimeError while the context is still valid is a real failure and propagates; so does a
    KeyboardInterrupt (Python's default handler, when `stop_through_rclpy` was not installed).
    """
    try:
        executor.spin_until_future_complete(future)
    except ExternalShutdownException:
        return False
    except RuntimeError:
        if rclpy.ok():
            raise
        return False
    return future.done()


def stop_when_parent_dies(bound: int | None, interval_s: float = PARENT_POLL_S) -> threading.Thread | None:
    """A daemon thread that shuts rclpy down once `bound`, the process that started this one (`children.start_child`;
    `parent.bound_parent()` read before rclpy starts up), is gone; None when no process bound this one. Call after
    `rclpy.init`: a parent that died in between is seen gone at once."""
    if bound is None:
        return None

    def watch() -> None:
        while not parent.parent_gone(bound):
            time.sleep(interval_s)
        rclpy.try_shutdown()  # the spin ends as on a stop signal

    thread = threading.Thread(target=watch, name="parent-watch", daemon=True)
    thread.start()
    return thread


@contextlib.contextmanager
def teardown_deadline(seconds: int = TEARDOWN_DEADLINE_S):
    """The body runs under SIGALRM's default action (the process ends) armed for `seconds`; disarmed after.

    Call from the main thread. A hang that holds the GIL is ended too: the kernel acts, not Python.
    """
    previous = signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _leave_it_to_rclpy(signum, frame) -> None:
    """rclpy has already shut the context down when this runs."""


def run_node(label: str, build: Callable[[], object], refusals: tuple[type[BaseException], ...],
             stop_future: Callable[[object], object], refused: Callable[[object], str | None] = lambda node: None,
             close: Callable[[object], None] = lambda node: None, args=None) -> int:
    """A node's whole life: init, build, spin until `stop_future(node)` or a stop signal, clean shutdown.

    Returns the process exit code: 0 when done or stopped, 2 when building raised one of `refusals` or
    the stop future ended with `refused(node)` giving a reason. `close(node)` runs before the node is
    destroyed, also after a signal.
    """
    from batonlab.deploy.timing import freeze_startup_objects

    bound = parent.bound_parent()  # now, while the parent-death signal would still end this process outright
    stop_through_rclpy()
    rclpy.init(args=args)
    stop_when_parent_dies(bound)
    node, executor, code = None, None, 0
    try:
        node = build()
        node.get_logger().info(f"{freeze_startup_objects()} start-up objects frozen out of the garbage collector")
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        if spin_until_stopped(executor, stop_future(node)) and refused(node) is not None:
            print(f"[{label}] refusing to start: {refused(node)}", file=sys.stderr, flush=True)
            code = 2
    except KeyboardInterrupt:
        pass
    except refusals as err:
        print(f"[{label}] refusing to start: {err}", file=sys.stderr, flush=True)
        code = 2
    except (RuntimeError, NotInitializedException):
        # A stop signal that shuts the context down while a callback publishes or takes a message surfaces
        # as rclpy's invalid-context error (RCLError, a RuntimeError), and one during `build` (the parent gone
        # while the node started) as NotInitializedException: a stop, not a failure.
        if rclpy.ok():
            raise
    finally:
        stop_through_rclpy()  # rclpy restored the default handler at shutdown: a second Ctrl-C must not cut the cleanup
        if node is not None:
            close(node)  # what the node keeps (results, bags) is written before the teardown that can hang
        with teardown_deadline():
            if executor is not None:
                executor.shutdown()  # drops its wait generator, which can hold the node's entities in use
            if node is not None:
                node.destroy_node()
            rclpy.try_shutdown()
    return code
