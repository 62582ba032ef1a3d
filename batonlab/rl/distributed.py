# SPDX-License-Identifier: BSD-3-Clause
"""Multi-GPU / multi-node training under `torchrun`, through rsl-rl's torch.distributed support.

One process per GPU: rank r steps its own envs on `cuda:<local_rank>` with seed `seed + r`, PPO
averages gradients across ranks (rsl-rl's all-reduce), and only rank 0 writes logs and
checkpoints. On CPUs the same path runs with the gloo backend (how the tests exercise it).

    # one node, 4 GPUs
    torchrun --standalone --nproc_per_node=4 -m batonlab.cli.main train task=wl_velocity distributed=true \
        device=cuda env.sim.backend=mujoco_warp
    # two nodes, 8 GPUs each (run on every node, NODE_RANK = 0 / 1)
    torchrun --nnodes=2 --nproc_per_node=8 --node_rank=$NODE_RANK --rdzv_backend=c10d \
        --rdzv_endpoint=$HEAD_NODE:29500 -m batonlab.cli.main train task=wl_velocity distributed=true \
        device=cuda env.sim.backend=mujoco_warp
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DistributedContext:
    """Where this process sits in the job, as torchrun describes it."""

    world_size: int
    rank: int
    """Global rank (0 writes logs and checkpoints)."""
    local_rank: int
    """Rank on this node; selects the GPU."""
    backend: str
    """`nccl` on GPUs, `gloo` on CPUs."""

    @property
    def is_main(self) -> bool:
        """Whether this is rank 0."""
        return self.rank == 0

    def device(self, requested: str) -> str:
        """`cuda` / `cuda:N` become this rank's GPU; `cpu` stays `cpu`."""
        return f"cuda:{self.local_rank}" if requested.startswith("cuda") else "cpu"

    def rsl_rl_cfg(self) -> dict:
        """The `multi_gpu` entry of rsl-rl's train_cfg."""
        return {"global_rank": self.rank, "local_rank": self.local_rank, "world_size": self.world_size}


def context_from_environment(requested_device: str, environ=os.environ) -> DistributedContext:
    """Read torchrun's variables; a clear error if the process was not started by torchrun."""
    missing = [k for k in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT") if k not in environ]
    if missing:
        raise RuntimeError(
            f"distributed=true needs torchrun's environment (missing {missing}); launch with "
            "`torchrun --standalone --nproc_per_node=N -m batonlab.cli.main train ... distributed=true`"
        )
    ctx = DistributedContext(
        world_size=int(environ["WORLD_SIZE"]),
        rank=int(environ["RANK"]),
        local_rank=int(environ["LOCAL_RANK"]),
        backend="nccl" if requested_device.startswith("cuda") else "gloo",
    )
    if not 0 <= ctx.rank < ctx.world_size or not 0 <= ctx.local_rank < ctx.world_size:
        raise RuntimeError(f"inconsistent torchrun ranks: {ctx}")
    return ctx


def init_process_group(ctx: DistributedContext) -> None:
    """Join the torch.distributed process group (and pin this rank's GPU for nccl)."""
    if ctx.backend == "nccl":
        torch.cuda.set_device(ctx.local_rank)
    torch.distributed.init_process_group(backend=ctx.backend, rank=ctx.rank, world_size=ctx.world_size)


def shutdown() -> None:
    """Leave the process group, if one was joined."""
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
