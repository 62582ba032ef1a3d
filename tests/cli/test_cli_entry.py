# SPDX-License-Identifier: BSD-3-Clause
"""One training entry: scripts train through `batonlab.cli.train.train`, as `batonlab train` does."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

import pytest

from batonlab.cli import train as cli_train

ROOT = Path(__file__).resolve().parents[2]


class _Called(Exception):
    pass


def test_wl_velocity_script_trains_through_the_cli_entry(monkeypatch, tmp_path):
    calls = []

    def fake_train(inv, on_iteration=None):
        calls.append(inv)
        raise _Called

    monkeypatch.setattr(cli_train, "train", fake_train)
    monkeypatch.setattr(sys, "argv", ["train_wl_velocity.py", "--iterations", "3", "--num-envs", "8",
                                      f"log_root={tmp_path}"])
    with pytest.raises(_Called):
        runpy.run_path(str(ROOT / "scripts" / "train_wl_velocity.py"), run_name="__main__")
    (inv,) = calls
    assert inv.task_name == "wl_velocity" and inv.task.num_envs == 8 and inv.top.max_iterations == 3
    assert inv.top.log_root == str(tmp_path)
