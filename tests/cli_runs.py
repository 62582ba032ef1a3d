# SPDX-License-Identifier: BSD-3-Clause
"""Running the `batonlab` command as a user does (a child process) or in this process (a deploy check)."""

from __future__ import annotations

import os
import subprocess
import sys

from batonlab.cli.main import main


def batonlab(*args: str, cwd) -> subprocess.CompletedProcess:
    """`batonlab ARGS` in a child process, as a user runs it; its output captured."""
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return subprocess.run([sys.executable, "-m", "batonlab.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def deploy(*args, capsys) -> tuple[int, str, str]:
    """`batonlab deploy ARGS` in this process; returns (exit code, stdout, stderr)."""
    code = main(["deploy", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err
