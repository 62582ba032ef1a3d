# SPDX-License-Identifier: BSD-3-Clause
"""Running the `batonlab` command as a user does (a child process) or in this process (a deploy check)."""

from __future__ import annotations

import os
import subprocess
import sys

from batonlab.cli.main import main


def batonlab(*args: str, cwd) -> subprocess.CompletedProcess:
    """`batonlab ARGS` in a child process, as a user runs it; its output captured."""
    return subprocess.run([sys.executable, "-m", "batonlab.cli.main", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=600)


def batonlab_at_once(*commands: tuple[str, ...], cwd) -> list[subprocess.CompletedProcess]:
    """Independent `batonlab` commands in child processes started together (each one's start-up, mostly
    imports, overlaps the others'); their results in order."""
    processes = [subprocess.Popen([sys.executable, "-m", "batonlab.cli.main", *args], cwd=cwd, env=_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for args in commands]
    results = []
    for args, process in zip(commands, processes):
        out, err = process.communicate(timeout=600)
        results.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
    return results


def _env() -> dict[str, str]:
    return {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}


def deploy(*args, capsys) -> tuple[int, str, str]:
    """`batonlab deploy ARGS` in this process; returns (exit code, stdout, stderr)."""
    code = main(["deploy", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err
