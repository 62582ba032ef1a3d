# SPDX-License-Identifier: BSD-3-Clause
"""Command-line mistakes fail in one line naming the key and what it expects, exit code 2, before any simulation."""

from __future__ import annotations

import pytest
import torch

from batonlab.cli.main import main
from cli_runs import batonlab

# The one-line corpus of train/play/export mistakes is tests/cli/test_bad_input_train.py.


@pytest.mark.parametrize("key", ["device", "env.sim.device"])
def test_cuda_without_cuda(key, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # a machine without CUDA, wherever this runs
    assert main(["train", "task=arm_reach", f"log_root={tmp_path}", f"{key}=cuda"]) == 2
    assert f"{key}=cuda: CUDA is not available" in capsys.readouterr().err


def test_a_user_sees_no_traceback(tmp_path):
    result = batonlab("train", "task=arm_reach", "env.num_envs=2.5", f"log_root={tmp_path}", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "batonlab train: env.num_envs=2.5: expected an integer\n"
    assert not (tmp_path / "arm_reach").exists()
