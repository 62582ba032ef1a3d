# SPDX-License-Identifier: BSD-3-Clause
"""Nothing a run wrote is lost: config.yaml and exports are atomic, run folders unique, and full disks,
read-only folders and files in the way are one line naming the path, with what stood before intact.

Every case runs `batonlab` as a user does (a subprocess). Signals are sent at the moment the command
starts writing, found by watching the file system; full and read-only disks are small tmpfs mounts.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from batonlab.deploy.manifest import MANIFEST_FILE, sha256_file
from batonlab.rl import checkpoint
from cli_runs import batonlab, batonlab_at_once

TINY = ["task=arm_reach", "env.num_envs=8", "agent.num_steps_per_env=8", "progress=false", "eval_episodes=0"]


def _start(*args: str, cwd: Path) -> subprocess.Popen:
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    # SIGINT's default restored: a shell's background job (`cmd &`) starts with it ignored, and Python then never raises
    # KeyboardInterrupt, as a command typed in a terminal would.
    return subprocess.Popen([sys.executable, "-m", "batonlab.cli.main", *args], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _signal_when(process: subprocess.Popen, appeared, signum: int, timeout_s: float = 120.0) -> Path:
    """Poll the file system as fast as Python can and send `signum` the moment `appeared()` returns a path."""
    deadline = time.monotonic() + timeout_s
    while (found := appeared()) is None:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "timed out waiting for the write"
    process.send_signal(signum)
    return found


def _first(folder: Path, names) -> Path | None:
    """The first entry of `folder` (or of its subfolders one level down) whose name satisfies `names`."""
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for entry in os.scandir(folder):
            if names(entry.name):
                return Path(entry.path)
            if entry.is_dir():
                with contextlib.suppress(FileNotFoundError):
                    for inner in os.scandir(entry.path):
                        if names(inner.name):
                            return Path(inner.path)
    return None


def _one_line_error(result, *fragments: str) -> str:
    """The command failed with exit code 2 and one line on stderr holding every fragment."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2 and len(lines) == 1, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr and all(f in lines[0] for f in fragments), lines
    return lines[0]


def _export_is_whole(export_dir: Path) -> None:
    """The manifest names the ONNX file beside it by its hash, and `batonlab deploy` runs it."""
    manifest = json.loads((export_dir / MANIFEST_FILE).read_text())
    assert manifest["policy"]["sha256"] == sha256_file(export_dir / manifest["policy"]["file"])
    checked = batonlab("deploy", str(export_dir), cwd=export_dir.parent)
    assert checked.returncode == 0, checked.stderr


@contextlib.contextmanager
def _tmpfs(path: Path, size: str = "4m", read_only: bool = False):
    """A small tmpfs at `path` (a disk that fills up, or a read-only one)."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip("a full or read-only disk is a tmpfs mounted by the test, which needs root (as in CI); "
                    f"mount said: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(disk: Path, leave_bytes: int) -> Path:
    """Fill `disk` until `leave_bytes` are free."""
    stat = os.statvfs(disk)
    free = stat.f_bavail * stat.f_frsize
    filler = disk / "filler"
    with open(filler, "wb") as f:
        f.write(b"\0" * max(free - leave_bytes, 0))
    return filler


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A one-iteration arm_reach run and its export (`<run>/exported`)."""
    root = tmp_path_factory.mktemp("trained")
    result = batonlab("train", "max_iterations=1", f"log_root={root}", *TINY, cwd=root)
    assert result.returncode == 0, result.stderr
    (run_dir,) = list(root.glob("arm_reach/*/"))
    exported = batonlab("export", f"run_dir={run_dir}", cwd=root)
    assert exported.returncode == 0, exported.stderr
    return run_dir


def test_sigint_while_config_yaml_is_written_leaves_a_run_that_plays_and_resumes(tmp_path):
    process = _start("train", "max_iterations=100000", "agent.save_interval=1000", f"log_root={tmp_path}", *TINY,
                     cwd=tmp_path)
    written = _signal_when(process, lambda: _first(tmp_path / "arm_reach", lambda n: "config.yaml" in n),
                           signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130 and "Traceback" not in err, err
    run_dir = written.parent
    config = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert config["task_name"] == "arm_reach", config
    assert not list(run_dir.glob(".config.yaml.*")), list(run_dir.iterdir())
    played = batonlab("play", f"run_dir={run_dir}", "play.num_episodes=2", "play.video=false", "progress=false",
                      cwd=tmp_path)
    assert played.returncode == 0, played.stderr
    (saved,) = checkpoint.checkpoints(run_dir)
    iteration = checkpoint.load(saved)["iter"]
    resumed = batonlab("train", f"max_iterations={iteration + 1}", "resume=true", f"run_dir={run_dir}",
                       f"log_root={tmp_path}", *TINY, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert (run_dir / f"model_{iteration + 1}.pt").is_file()


def test_trainings_started_in_the_same_second_get_folders_of_their_own(tmp_path):
    # Every timestamp of the next two minutes is taken already: each run must make a folder of its own.
    experiment = tmp_path / "arm_reach"
    now = datetime.datetime.now()
    taken = [experiment / (now + datetime.timedelta(seconds=s)).strftime("%Y-%m-%d_%H-%M-%S") for s in range(120)]
    for folder in taken:
        folder.mkdir(parents=True)
        (folder / "other_run.txt").write_text("not yours")
    seeds = (1, 2)
    processes = [_start("train", "max_iterations=1", f"seed={seed}", f"log_root={tmp_path}", *TINY, cwd=tmp_path)
                 for seed in seeds]
    for process in processes:
        _, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
    for folder in taken:
        assert [p.name for p in folder.iterdir()] == ["other_run.txt"], f"a run wrote into {folder}"
    runs = sorted(set(experiment.iterdir()) - set(taken))
    assert len(runs) == 2, runs
    assert sorted(yaml.safe_load((r / "config.yaml").read_text())["cli"]["seed"] for r in runs) == list(seeds)
    assert all(r.name.rsplit("_", 1)[-1].isdigit() and (r / "model_1.pt").is_file() for r in runs)


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_an_export_interrupted_while_writing_leaves_the_previous_export(trained, signum):
    exported = trained / "exported"
    before = sha256_file(exported / "policy.onnx"), (exported / MANIFEST_FILE).read_bytes()
    started = {p.name: p.stat().st_mtime_ns for p in exported.iterdir()}

    def writing() -> Path | None:
        # Today's writer: a file of exported/ rewritten; the atomic one: its folder built beside it.
        for entry in (*os.scandir(trained), *(os.scandir(exported) if exported.is_dir() else ())):
            if entry.name.startswith(".exported.") or started.get(entry.name, entry.stat().st_mtime_ns) != \
                    entry.stat().st_mtime_ns:
                return Path(entry.path)
        return None

    process = _start("export", f"run_dir={trained}", cwd=trained)
    _signal_when(process, writing, signum)
    _, err = process.communicate(timeout=120)
    if signum == signal.SIGINT:
        assert process.returncode in (0, 130) and "Traceback" not in err, err
    _export_is_whole(exported)
    if process.returncode != 0:
        assert (sha256_file(exported / "policy.onnx"), (exported / MANIFEST_FILE).read_bytes()) == before
    again = batonlab("export", f"run_dir={trained}", cwd=trained)
    assert again.returncode == 0, again.stderr
    assert not [p for p in trained.iterdir() if p.name.startswith(".exported.")], "a stale temporary was kept"
    _export_is_whole(exported)


def test_a_full_disk_during_an_export_keeps_the_previous_one(trained, tmp_path):
    with _tmpfs(tmp_path / "disk", size="2m") as disk:
        out_dir = disk / "exported"
        first = batonlab("export", f"run_dir={trained}", f"export.out_dir={out_dir}", cwd=tmp_path)
        assert first.returncode == 0, first.stderr
        before = (out_dir / MANIFEST_FILE).read_bytes()
        _fill(disk, leave_bytes=8 * 1024)
        full = batonlab("export", f"run_dir={trained}", f"export.out_dir={out_dir}", cwd=tmp_path)
        _one_line_error(full, str(out_dir), "No space left on device")
        assert (out_dir / MANIFEST_FILE).read_bytes() == before
        assert sorted(p.name for p in disk.iterdir()) == ["exported", "filler"]
        _export_is_whole(out_dir)


def test_a_full_disk_during_a_checkpoint_keeps_the_last_good_one_and_resume_continues(trained, tmp_path):
    with _tmpfs(tmp_path / "disk", size="16m") as disk:
        run_dir = disk / "run"
        subprocess.run(["cp", "-r", str(trained), str(run_dir)], check=True)
        args = ["resume=true", f"run_dir={run_dir}", f"log_root={disk}", "agent.save_interval=1", *TINY]
        filler = _fill(disk, leave_bytes=16 * 1024)
        full = batonlab("train", "max_iterations=3", *args, cwd=tmp_path)
        _one_line_error(full, str(run_dir / "model_2.pt"), "No space left on device")
        assert [p.name for p in checkpoint.checkpoints(run_dir)] == ["model_1.pt"]
        assert not list(run_dir.glob(".model_*")), "the failed save left its temporary"
        filler.unlink()
        resumed = batonlab("train", "max_iterations=2", *args, cwd=tmp_path)
        assert resumed.returncode == 0, resumed.stderr
        assert checkpoint.load(run_dir / "model_2.pt")["iter"] == 2


def test_a_full_disk_while_recording_is_one_line_naming_the_bag(trained, tmp_path):
    with _tmpfs(tmp_path / "disk", size="1m") as disk:
        _fill(disk, leave_bytes=4 * 1024)
        result = batonlab("play", f"run_dir={trained}", f"record={disk / 'bags'}", "play.num_episodes=2",
                          "play.record_episodes=2", "play.video=false", "progress=false", cwd=tmp_path)
        _one_line_error(result, str(disk / "bags"), "No space left on device")


def _writing_commands(trained: Path, log_root: Path, export_dir: Path, bags: Path) -> list[tuple[str, ...]]:
    """`batonlab train`, `export` and `play record=` of `trained`, writing to the given places."""
    return [("train", "max_iterations=1", f"log_root={log_root}", *TINY),
            ("export", f"run_dir={trained}", f"export.out_dir={export_dir}"),
            ("play", f"run_dir={trained}", f"record={bags}", "play.num_episodes=1", "play.video=false", "progress=false")]


def test_read_only_folders_and_files_in_the_way_are_one_line_naming_the_path(trained, tmp_path):
    in_the_way = tmp_path / "a_file"
    in_the_way.write_text("not a folder")
    train, export, recorded = batonlab_at_once(*_writing_commands(trained, in_the_way, in_the_way, tmp_path / "bags"),
                                               cwd=tmp_path)
    _one_line_error(train, str(in_the_way), "is a file, not a folder")
    _one_line_error(export, str(in_the_way), "is a file, not a folder")
    assert recorded.returncode == 0, recorded.stderr
    (bag,) = list((tmp_path / "bags").iterdir())
    with _tmpfs(tmp_path / "ro", size="1m", read_only=True) as read_only:
        bag_export, train, export, play = batonlab_at_once(
            ("bag", "export", str(bag), "--csv", str(in_the_way)),
            *_writing_commands(trained, read_only, read_only / "exported", read_only / "bags"), cwd=tmp_path)
        _one_line_error(bag_export, str(in_the_way), "is a file, not a folder")
        _one_line_error(train, str(read_only), "Read-only file system")
        _one_line_error(export, str(read_only), "Read-only file system")
        _one_line_error(play, str(read_only / "bags"), "Read-only file system")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "bags", "ro"], "a failed command left files"
    assert in_the_way.read_text() == "not a folder"


@pytest.mark.parametrize("command", ["export", "train", "play"])
def test_sigint_while_the_command_starts_is_one_line(trained, command):
    # 0.3 s in, the command is still importing its stack (torch, mujoco, hydra).
    process = _start(command, f"run_dir={trained}", *(["resume=true", *TINY] if command == "train" else []),
                     cwd=trained)
    time.sleep(0.3)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130 and "Traceback" not in err, err
    assert err.strip() == f"batonlab {command}: interrupted", err
