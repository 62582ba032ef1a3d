# SPDX-License-Identifier: BSD-3-Clause
"""A child of `children.start_child` stops on the signals `children.stop` sends, whatever its parent ignores."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from batonlab.cli import children

SLEEPER = "import time; print('started', flush=True); time.sleep(60)"


@pytest.mark.parametrize("sig", children.STOP_SIGNALS, ids=lambda sig: sig.name)
def test_a_child_of_a_parent_that_ignores_a_stop_signal_still_stops_on_it(sig):
    """A shell's background job (CI, a launch script's `&`) ignores SIGINT, and an ignored signal is inherited:
    the sim robot stopped while it imported its modules ran on until SIGTERM, 30 s later, in every CI run."""
    previous = signal.signal(sig, signal.SIG_IGN)
    try:
        child = children.start_child([sys.executable, "-c", SLEEPER], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
    finally:
        signal.signal(sig, previous)
    try:
        assert child.stdout.readline().strip() == "started"
        child.send_signal(sig)
        assert child.wait(timeout=30) == -sig  # ignored, it would sleep on and time out here
    finally:
        child.kill()
        child.wait()
