# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab train task=NAME [resume=true] [env.…=…] [agent.…=…]`."""

from __future__ import annotations

from omegaconf import OmegaConf

from batonlab.cli.common import CliError, Invocation, find_checkpoint, find_run_dir, new_run_dir, seed_everything
from batonlab.env.env import BatonEnv
from batonlab.rl import distributed
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.utils.serialize import write_yaml


def run(inv: Invocation) -> int:
    top = inv.top
    ctx, device = None, str(top.device)
    if top.distributed:
        try:
            ctx = distributed.context_from_environment(device)
        except RuntimeError as err:
            raise CliError(str(err)) from None
        device = ctx.device(device)
        if inv.task.sim.device.startswith("cuda"):
            inv.task.sim.device = device
        inv.task.seed += ctx.rank  # decorrelated rollouts across ranks
        distributed.init_process_group(ctx)
        print(f"[batonlab] rank {ctx.rank}/{ctx.world_size} on {device} ({ctx.backend}), seed {inv.task.seed}")
    try:
        return _train(inv, device, ctx)
    finally:
        distributed.shutdown()


def _train(inv: Invocation, device: str, ctx) -> int:
    top = inv.top
    is_main = ctx is None or ctx.is_main
    seed_everything(inv.task.seed)
    run_dir = find_run_dir(top, inv.agent.experiment_name) if top.resume else new_run_dir(top, inv.agent.experiment_name)
    env = RslRlVecEnv(BatonEnv(inv.task))
    runner = BatonRunner(env, inv.agent, log_dir=run_dir, device=device, distributed=ctx)
    if top.resume:
        ckpt = find_checkpoint(top, run_dir)
        runner.load(ckpt)
        print(f"[batonlab] resuming {run_dir} from {ckpt.name} (iteration {runner.iteration})")
    else:
        print(f"[batonlab] training {inv.task_name} in {run_dir}")
    # The resolved config is written after the env is built, so it is the config that ran.
    if is_main:
        write_yaml({"task_name": inv.task_name, "cli": OmegaConf.to_container(top), "env": inv.task, "agent": inv.agent}, run_dir / "config.yaml")
    total = int(top.max_iterations) if top.max_iterations is not None else inv.agent.max_iterations
    stats = runner.learn(total, progress=bool(top.progress))
    summary = ", ".join(f"{k}={stats[k]:.3f}" for k in ("Train/mean_return", "Episode/success_rate") if k in stats)
    print(f"[batonlab] done: {runner.iteration} iterations, {runner.total_env_steps} env steps; {summary}")
    if is_main:
        print(f"[batonlab] checkpoints and TensorBoard logs: {run_dir}")
    env.env.close()
    return 0
