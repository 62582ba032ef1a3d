# SPDX-License-Identifier: BSD-3-Clause
"""The deploy nodes freeze their start-up objects out of the cyclic garbage collector: a full collection
in a process holding torch and MuJoCo walked every one of them, long enough (about 300 ms on 2 cores)
to stall the simulated robot past the policy's stale timeout."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")

from batonlab.cli.deploy import ros_environment  # noqa: E402
from ros.nodes import new_domain_id  # noqa: E402

PROBE = """
import gc, json, time
from batonlab.sim2sim.robot import SimRobot
from batonlab.deploy.timing import freeze_startup_objects

robot = SimRobot("arm_reach", seed=0)
tracked = len(gc.get_objects())
start = time.perf_counter(); gc.collect(); before_ms = (time.perf_counter() - start) * 1e3
frozen = freeze_startup_objects()
left = len(gc.get_objects())
start = time.perf_counter(); gc.collect(); after_ms = (time.perf_counter() - start) * 1e3
cycle = []; cycle.append(cycle); del cycle
for _ in range(3):
    robot.step()
print(json.dumps(dict(tracked=tracked, frozen=frozen, left=left, collected=gc.collect(), before_ms=before_ms,
                      after_ms=after_ms)))
"""


def test_freezing_leaves_the_collector_only_what_is_made_later():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300,
                            env=ros_environment(new_domain_id()))
    assert result.returncode == 0, result.stderr
    counts = json.loads(result.stdout.strip().splitlines()[-1])
    print(f"\n[gc] sim robot process: {counts['tracked']} tracked objects, full collection "
          f"{counts['before_ms']:.0f} ms; {counts['frozen']} frozen, {counts['left']} left, {counts['after_ms']:.1f} ms")
    assert counts["tracked"] > 100_000, "the probe should hold torch and MuJoCo"
    assert counts["frozen"] >= 0.9 * counts["tracked"]
    assert counts["left"] < 0.01 * counts["frozen"], "a full collection would still walk the start-up objects"
    assert counts["collected"] >= 1, "garbage made after the freeze must still be collected"
