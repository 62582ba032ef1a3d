# SPDX-License-Identifier: BSD-3-Clause
"""Env throughput vs raw `mujoco.rollout` on the same model, substeps and threads, in one process.

    python bench/env_throughput.py [--tasks arm_reach ...] [--num-envs 4096] [--steps 200]

For each task it prints env steps/s of `BatonEnv.step` (actions, physics, terms, resets,
observations) and of bare `mujoco.rollout` stepping the same worlds with the same decimation and
thread count, and their ratio (target, ARCHITECTURE §9: >= 0.8). The headline baseline uses the
env's own per-world models (the task randomises joint parameters at startup, so each world has its
own MjModel copy); two more baselines show what randomisation and per-step restarts cost: one
shared template model for all worlds, and one long 50-step rollout per call.
"""

from __future__ import annotations

import argparse
import json
import time

import mujoco
import numpy as np
import torch
from mujoco import rollout

from batonlab.env.env import BatonEnv
from batonlab.tasks import list_tasks, make_task_cfg


def raw_rollout_steps_per_s(models: list[mujoco.MjModel], initial_state: np.ndarray, substeps: int, env_steps: int,
                            threads: int, chunk_env_steps: int = 1) -> float:
    """Env-equivalent steps/s of bare `mujoco.rollout` (physics steps/s divided by the decimation).

    With `chunk_env_steps=1` each call advances `substeps` physics steps, as the env does, and the
    state is carried to the next call in numpy: the cost of physics alone at the env's granularity.
    Larger chunks show the ceiling of one long open-loop rollout (warm-started solver, no restarts).
    `models` has one entry per world: the env's own per-world (randomised) copies, or one shared template.
    """
    n = initial_state.shape[0]
    model = models[0]
    nstep = chunk_env_steps * substeps
    control = np.zeros((n, nstep, model.nu))
    state = np.empty((n, nstep, initial_state.shape[1]))
    sensordata = np.empty((n, nstep, model.nsensordata))
    datas = [mujoco.MjData(model) for _ in range(threads)]
    spec = int(mujoco.mjtState.mjSTATE_CTRL)
    current = initial_state.copy()
    with rollout.Rollout(nthread=threads) as pool:
        def advance():
            pool.rollout(models, datas, current, control, control_spec=spec, skip_checks=True, nstep=nstep,
                         state=state, sensordata=sensordata, chunk_size=max(1, n // (threads * 8)))
            np.copyto(current, state[:, -1])

        advance()  # warm-up
        calls = max(1, env_steps // chunk_env_steps)
        start = time.perf_counter()
        for _ in range(calls):
            advance()
        elapsed = time.perf_counter() - start
    return n * calls * chunk_env_steps / elapsed


def env_steps_per_s(env: BatonEnv, env_steps: int) -> float:
    actions = 0.3 * torch.randn(env.num_envs, env.num_actions, generator=torch.Generator().manual_seed(0))
    for _ in range(5):  # warm-up
        env.step(actions)
    start = time.perf_counter()
    for _ in range(env_steps):
        env.step(actions)
    return env.num_envs * env_steps / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="*", default=None, help="default: every registered task")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=200, help="env steps per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="alternating measurement rounds (median reported)")
    parser.add_argument("--out", default=None, help="write the figures as JSON")
    args = parser.parse_args()
    names = args.tasks or [t.name for t in list_tasks()]
    results = []
    parser_rounds = args.rounds
    print("env: BatonEnv.step | raw: bare rollout on the env's own per-world models, same substeps and threads |\n"
          "shared: bare rollout with one shared template model (no randomised copies) | long: one 50-step rollout per call")
    print(f"{'task':16s} {'envs':>6s} {'thr':>4s} {'sub':>4s} {'env':>9s} {'raw':>9s} {'ratio':>6s}"
          f" {'shared':>9s} {'ratio':>6s} {'long':>9s} {'ratio':>6s}")
    for name in names:
        cfg = make_task_cfg(name)
        cfg.num_envs = args.num_envs
        env = BatonEnv(cfg)
        threads, substeps = env.sim.num_threads, cfg.sim.decimation
        model = env.scene.model
        # Rounds alternate env and raw so that a busy machine slows both alike; medians are reported.
        per_world = list(env.sim._models)
        shared = [model] * args.num_envs
        env_rates, raw_rates, shared_rates, long_rates = [], [], [], []
        for _ in range(parser_rounds):
            env_rates.append(env_steps_per_s(env, args.steps))
            # The raw baselines start from the env's own current states (same contacts).
            state = env.sim._state.copy()
            raw_rates.append(raw_rollout_steps_per_s(per_world, state, substeps, args.steps, threads))
            shared_rates.append(raw_rollout_steps_per_s(shared, state, substeps, args.steps, threads))
            long_rates.append(raw_rollout_steps_per_s(per_world, state, substeps, args.steps, threads, chunk_env_steps=50))
        env.close()
        env_rate, raw_rate, shared_rate, long_rate = (
            float(np.median(r)) for r in (env_rates, raw_rates, shared_rates, long_rates))
        row = {"task": name, "num_envs": args.num_envs, "threads": threads, "substeps": substeps,
               "env_steps_per_s": env_rate, "raw_rollout_steps_per_s": raw_rate, "ratio": env_rate / raw_rate,
               "raw_shared_model_steps_per_s": shared_rate, "ratio_to_shared_model": env_rate / shared_rate,
               "raw_long_rollout_steps_per_s": long_rate, "ratio_to_long_rollout": env_rate / long_rate}
        results.append(row)
        print(f"{name:16s} {args.num_envs:6d} {threads:4d} {substeps:4d} {env_rate:9.0f} {raw_rate:9.0f} {row['ratio']:6.2f}"
              f" {shared_rate:9.0f} {row['ratio_to_shared_model']:6.2f} {long_rate:9.0f} {row['ratio_to_long_rollout']:6.2f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
