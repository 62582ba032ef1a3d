# SPDX-License-Identifier: BSD-3-Clause
"""Child processes that end with their parent: a process group of their own, a parent-death signal, a stop in steps.

A child of `start_child` is out of its parent's process group, so a terminal's Ctrl-C (sent to the
foreground group) reaches the parent alone, which stops its children in the order it chooses
(`stop`). On Linux the kernel sends the child `PARENT_DEATH_SIGNAL` when the parent dies, SIGKILL
included (prctl PR_SET_PDEATHSIG); strictly, when the thread that started it ends, so a caller starts
children from a thread that outlives them. A child that handles that signal itself (an rclpy node)
can still miss it while it starts up, so it also watches its parent (`batonlab.deploy.parent`).

A child starts with SIGINT and SIGTERM at their default actions. An ignored signal stays ignored across exec,
and Python only installs its KeyboardInterrupt handler over a default one: a `batonlab deploy` started in the
background by a non-interactive shell (a CI job, a launch script's `&`) has SIGINT ignored, and a node stopped
while it imported its modules ran on until SIGTERM, 30 s later (CI, every run).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import signal
import subprocess
import sys

from batonlab.deploy.parent import PARENT_PID_ENV

PARENT_DEATH_SIGNAL = signal.SIGTERM
"""What a child gets when its parent dies: an rclpy node shuts down on it as on SIGINT (its bag closed)."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals `stop` sends; a child starts with both at their default actions, whatever its parent ignores."""

STOP_TERM_TIMEOUT_S = 5.0
"""How long `stop` waits after SIGTERM before SIGKILL [s]."""

_PR_SET_PDEATHSIG = 1


def start_child(cmd: list[str], env: dict[str, str] | None = None, **popen_kwargs) -> subprocess.Popen:
    """`subprocess.Popen(cmd, env=env, **popen_kwargs)`, the child in its own process group and bound to this process
    (its environment names this process in `PARENT_PID_ENV`)."""
    env = {**(os.environ if env is None else env), PARENT_PID_ENV: str(os.getpid())}
    return subprocess.Popen(cmd, env=env, preexec_fn=_bind_to_parent(os.getpid(), _prctl()), **popen_kwargs)


def stop(process: subprocess.Popen, timeout: float, term_timeout: float = STOP_TERM_TIMEOUT_S) -> int:
    """SIGINT (a clean ROS shutdown), SIGTERM after `timeout` s, SIGKILL after `term_timeout` s more; the exit code."""
    for sig, wait_s in zip(STOP_SIGNALS, (timeout, term_timeout)):
        if process.poll() is None:
            process.send_signal(sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(wait_s)
    if process.poll() is None:
        process.kill()
    return process.wait()


# Private functions.


@functools.lru_cache(maxsize=1)
def _prctl():
    """libc's prctl, loaded in the parent (the child between fork and exec only calls it); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True).prctl


def _bind_to_parent(parent: int, prctl):
    def bind() -> None:
        os.setpgid(0, 0)
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(PARENT_DEATH_SIGNAL), 0, 0, 0)
            if os.getppid() != parent:  # the parent died before the prctl: no signal would come
                os._exit(1)

    return bind
