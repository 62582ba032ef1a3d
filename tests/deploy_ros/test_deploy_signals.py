# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab deploy --sim` leaves nothing running: SIGINT or SIGTERM stops its nodes, keeps the episodes done (results
file, bag) and exits 130; SIGKILL of it ends the nodes too (their parent-death signal). Bad arguments are one line."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ros.exports import make_export
from cli_runs import deploy

MCAP_MAGIC = b"\x89MCAP0\r\n"
EPISODE_LINE = re.compile(r"\]: episode \d+ \(seed \d+\): success=")
"""sim_robot_node's log line for an episode that ended."""


def start_deploy(export_dir: Path, *args) -> subprocess.Popen:
    """`batonlab deploy --sim EXPORT ARGS` in a session of its own (its process group is its pid), on a new domain."""
    from ros.nodes import new_domain_id

    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return subprocess.Popen([sys.executable, "-m", "batonlab.cli.main", "deploy", "--sim", str(export_dir),
                             "--episodes", "1000", "--domain-id", str(new_domain_id()), *map(str, args)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def episodes_logged(export_dir: Path) -> int:
    """How many episodes sim_robot_node's log says have ended."""
    log = export_dir / "sim_to_sim" / "sim_robot_node.log"
    return len(EPISODE_LINE.findall(log.read_text(errors="replace"))) if log.is_file() else 0


def wait_for_episodes(export_dir: Path, count: int, process: subprocess.Popen, timeout_s: float = 180.0) -> None:
    """Until `count` episodes have ended (`process` still running)."""
    deadline = time.monotonic() + timeout_s
    while episodes_logged(export_dir) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"sim_robot_node did not end {count} episodes in {timeout_s:.0f} s"
        time.sleep(0.1)


@contextlib.contextmanager
def deploy_with_nodes(export_dir: Path, episodes: int, *args):
    """`batonlab deploy --sim` once `episodes` have ended: yields it and its descendants; kills what is left after."""
    process = start_deploy(export_dir, *args)
    started = {}
    try:
        wait_for_episodes(export_dir, episodes, process)
        started.update(descendants(process.pid))
        yield process, started
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
        kill_left(started)


def processes() -> dict[int, tuple[int, int, str, int]]:
    """Every live process: pid → (ppid, process group, state, start time), from /proc (psutil is not a dependency)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] not in ("Z", "X"):  # a zombie has ended; its reaper may not be watching
            table[int(entry.name)] = (int(fields[1]), int(fields[2]), fields[0], int(fields[19]))
    return table


def descendants(pid: int) -> dict[int, tuple[int, int]]:
    """Live descendants of `pid`: pid → (start time, telling it from a later process of that pid; its group)."""
    table, found, frontier = processes(), {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, group, _, start) in table.items():
            if ppid == parent and child not in found:
                found[child] = (start, group)
                frontier.append(child)
    return found


def left_running(started: dict[int, tuple[int, int]], groups: set[int]) -> list[str]:
    """`started` processes still running, and any live process in one of the process groups `groups`."""
    left = []
    for pid, (_, group, _, start) in processes().items():
        if started.get(pid, (None,))[0] == start or group in groups:
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            left.append(f"{pid}: {command[:120]}")
    return left


def kill_left(started: dict[int, tuple[int, int]]) -> None:
    """SIGKILL to the `started` processes still running (the code before this fix left its nodes behind)."""
    for pid, (_, _, _, start) in processes().items():
        if started.get(pid, (None,))[0] == start:
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=lambda sig: sig.name)
def test_a_stop_signal_ends_the_nodes_keeps_what_they_wrote_and_exits_130(tmp_path, sig):
    """The signal to `batonlab deploy` alone (a job scheduler's SIGTERM; a kill -INT): after two episodes, it stops
    both nodes, exits 130 without a traceback, and no process it started is left; the results file holds every
    episode sim_robot_node ended and the summary says so; policy_node's bag is closed (MCAP footer)."""
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    export_dir, results, bags = make_export(tmp_path / "export"), tmp_path / "results.json", tmp_path / "bags"
    with deploy_with_nodes(export_dir, 2, "--results", results, "--record", bags) as (process, started):
        process.send_signal(sig)
        out, err = process.communicate(timeout=120)
        left = left_running(started, {process.pid} | {group for _, group in started.values()})
    assert len(started) >= 3, f"expected sim_robot_node, policy_node and its bag writer, found {started}"
    assert process.returncode == 130, out + err
    assert "Traceback" not in out + err
    assert not left, f"left running after batonlab deploy exited: {left}"
    summary = json.loads(results.read_text())
    done = episodes_logged(export_dir)
    assert done >= 2 and summary["num_episodes"] == done
    assert [e["episode"] for e in summary["episodes"]] == list(range(done))
    assert f"over {done} episodes" in out and f"stopped: {done} episodes done" in out, out
    (bag,) = bags.iterdir()
    (mcap,) = bag.glob("*.mcap")
    data = mcap.read_bytes()
    assert (bag / "metadata.yaml").is_file()
    assert data.startswith(MCAP_MAGIC) and data.endswith(MCAP_MAGIC), f"{mcap} has no footer"


def test_the_nodes_end_when_deploy_is_killed(tmp_path):
    """SIGKILL leaves `batonlab deploy` no chance to stop its nodes: the kernel's parent-death signal does, within
    seconds."""
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    export_dir = make_export(tmp_path / "export")
    with deploy_with_nodes(export_dir, 1) as (process, started):
        process.kill()
        process.communicate()
        deadline = time.monotonic() + 10.0
        while (left := left_running(started, set())) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert len(started) >= 2, f"expected sim_robot_node and policy_node, found {started}"
    assert not left, f"running 10 s after batonlab deploy was killed: {left}"


def test_negative_episodes_are_refused_in_one_line(tmp_path, capsys):
    from ros.nodes import new_domain_id

    export_dir = make_export(tmp_path / "export")
    code, out, err = deploy("--sim", export_dir, "--episodes", -3, "--domain-id", new_domain_id(), capsys=capsys)
    assert code == 2
    assert err.strip() == "batonlab deploy: --episodes -3: must be >= 0 (0: run until stopped)"
    assert not (export_dir / "sim_to_sim").exists(), "the nodes were started"


def test_an_empty_folder_has_no_manifest(tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = deploy(empty, capsys=capsys)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line == f"batonlab deploy: no manifest.json in {empty}: not an export folder, nor a run folder to export"
