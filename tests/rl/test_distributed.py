# SPDX-License-Identifier: BSD-3-Clause
"""Multi-process training: torchrun's environment, rsl-rl's multi_gpu config, a real 2-rank run (gloo)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from batonlab.rl.cfg import RunnerCfg, to_rsl_rl_dict
from batonlab.rl.distributed import context_from_environment

TORCHRUN_ENV = {"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


def test_context_from_torchrun_environment():
    ctx = context_from_environment("cuda", TORCHRUN_ENV)
    assert (ctx.world_size, ctx.rank, ctx.local_rank, ctx.backend) == (4, 3, 1, "nccl")
    assert ctx.device("cuda:0") == "cuda:1" and not ctx.is_main
    assert to_rsl_rl_dict(RunnerCfg(), multi_gpu=ctx.rsl_rl_cfg())["multi_gpu"] == {
        "global_rank": 3, "local_rank": 1, "world_size": 4}
    assert context_from_environment("cpu", TORCHRUN_ENV).backend == "gloo"
    assert to_rsl_rl_dict(RunnerCfg())["multi_gpu"] is None  # the single-process path


def test_missing_torchrun_environment_is_a_clear_error():
    with pytest.raises(RuntimeError, match="launch with `torchrun"):
        context_from_environment("cpu", {"WORLD_SIZE": "2"})
    with pytest.raises(RuntimeError, match="inconsistent"):
        context_from_environment("cpu", {**TORCHRUN_ENV, "RANK": "7"})


def test_two_ranks_train_with_gloo(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN_ENV}
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         "-m", "batonlab.cli.main", "train", "task=arm_reach", "distributed=true", "max_iterations=2",
         "env.num_envs=16", "agent.num_steps_per_env=8", "env.sim.num_threads=1", "progress=false",
         f"log_root={tmp_path}/logs"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "rank 0/2" in result.stdout and "rank 1/2" in result.stdout
    assert "seed 42" in result.stdout and "seed 43" in result.stdout  # seeds offset by rank
    (run_dir,) = (tmp_path / "logs" / "arm_reach").iterdir()  # only rank 0 writes
    assert (run_dir / "model_2.pt").is_file()
