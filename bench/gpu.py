# SPDX-License-Identifier: BSD-3-Clause
"""GPU throughput of the `mujoco_warp` backend: env steps/s vs raw mujoco_warp, and PPO timings.

    python bench/gpu.py [--device cuda:0] [--out gpu.json]      # the real run, < 8 min on one H200
    python bench/gpu.py --device cpu --quick                    # smoke run on Warp's CPU device

For each task (`arm_reach`, and `wl_velocity` when it is registered) and each world count it
prints:

- env steps/s of `BatonEnv.step` (actions, physics, terms, resets, observations) with episode
  phases spread as in training, so resets happen every step;
- raw steps/s of bare mujoco_warp on the same model and substeps (a captured CUDA graph of
  `decimation` calls to `mujoco_warp.step`, replayed back to back, no torch in between), started
  from the env's own state;
- their ratio (the env's overhead; ARCHITECTURE §9 asks the CPU backend for >= 0.8);

then one PPO iteration of `BatonRunner` split into collection (env + policy inference) and
learning (PPO update), median over a few iterations after a warm-up one.

Kernels compile on first use (cached by Warp under ~/.cache/warp); models that differ compile
their own. A time budget (`--budget-s`) skips what would not fit and says so; the JSON is rewritten
after every figure, so an interrupted run still leaves what it measured.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import time

import mujoco
import torch
import warp as wp

# The init banner and one line per loaded module would bury the table.
wp.config.log_level = wp.LOG_WARNING

import mujoco_warp as mjw  # noqa: E402

from batonlab.env.env import BatonEnv  # noqa: E402
from batonlab.rl.runner import BatonRunner  # noqa: E402
from batonlab.rl.vecenv import RslRlVecEnv  # noqa: E402
from batonlab.tasks import list_tasks, make_agent_cfg, make_task_cfg  # noqa: E402

TASKS = ("arm_reach", "wl_velocity")
SIZES = (1024, 4096, 8192)
QUICK_SIZES = (4, 16)


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_env(task: str, num_envs: int, device: str) -> BatonEnv:
    cfg = make_task_cfg(task)
    cfg.num_envs = num_envs
    cfg.sim.backend = "mujoco_warp"
    cfg.sim.device = device
    env = BatonEnv(cfg)
    # Spread episode phases as the runner does, so resets (and their sensor refresh) happen every step.
    env.episode_length_buf[:] = torch.randint_like(env.episode_length_buf, high=int(env.max_episode_length))
    return env


def env_steps_per_s(env: BatonEnv, env_steps: int, warmup: int) -> float:
    """`BatonEnv.step` throughput with fixed random actions; the warm-up compiles and captures graphs."""
    generator = torch.Generator(device=env.device).manual_seed(0)
    actions = 0.3 * torch.randn(env.num_envs, env.num_actions, generator=generator, device=env.device)
    for _ in range(warmup):
        env.step(actions)
    synchronize(env.device)
    start = time.perf_counter()
    for _ in range(env_steps):
        env.step(actions)
    synchronize(env.device)
    return env.num_envs * env_steps / (time.perf_counter() - start)


def raw_steps_per_s(model: mujoco.MjModel, qpos: torch.Tensor, qvel: torch.Tensor, substeps: int, env_steps: int,
                    device: str) -> float:
    """Env-equivalent steps/s of bare mujoco_warp: `substeps` physics steps per env step, one graph replay."""
    wp_device = wp.get_device(device)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    with wp.ScopedDevice(wp_device):
        m = mjw.put_model(model)
        if wp_device.is_cuda and not wp.is_conditional_graph_supported():
            m.opt.graph_conditional = False
        d = mjw.put_data(model, data, nworld=qpos.shape[0])
        wp.to_torch(d.qpos).copy_(qpos)
        wp.to_torch(d.qvel).copy_(qvel)

        def advance():
            for _ in range(substeps):
                mjw.step(m, d)

        advance()  # compiles the kernels
        graph = None
        if wp_device.is_cuda:
            with wp.ScopedCapture(force_module_load=False) as capture:
                advance()
            graph = capture.graph
        wp.synchronize_device(wp_device)
        start = time.perf_counter()
        for _ in range(env_steps):
            if graph is not None:
                wp.capture_launch(graph)
            else:
                advance()
        wp.synchronize_device(wp_device)
        elapsed = time.perf_counter() - start
    return qpos.shape[0] * env_steps / elapsed


def ppo_iteration_times(env: BatonEnv, task: str, iterations: int, num_steps_per_env: int | None) -> dict:
    """Collect and learn seconds of `BatonRunner` iterations; the first (warm-up) one is dropped."""
    agent_cfg = make_agent_cfg(task)
    if num_steps_per_env is not None:
        agent_cfg.num_steps_per_env = num_steps_per_env
    with contextlib.redirect_stdout(io.StringIO()):  # rsl-rl prints both networks
        runner = BatonRunner(RslRlVecEnv(env), agent_cfg, log_dir=None, device=str(env.device))
    collect, learn = [], []
    for i in range(1, iterations + 2):
        stats = runner.learn(max_iterations=i, progress=False)
        if i > 1:
            collect.append(stats["Perf/collection_time_s"])
            learn.append(stats["Perf/learning_time_s"])
    collect_s, learn_s = statistics.median(collect), statistics.median(learn)
    steps = agent_cfg.num_steps_per_env * env.num_envs
    return {
        "num_envs": env.num_envs,
        "num_steps_per_env": agent_cfg.num_steps_per_env,
        "collect_s": collect_s,
        "learn_s": learn_s,
        "iteration_s": collect_s + learn_s,
        "collect_fraction": collect_s / (collect_s + learn_s),
        "env_steps_per_s_in_training": steps / (collect_s + learn_s),
    }


def bench_task(task: str, args, report: dict, note, over_budget, save) -> None:
    """Throughput rows at every size, then the PPO breakdown, for one task (JSON saved after each)."""
    result = report["tasks"][task] = {"throughput": [], "ppo": None}
    for num_envs in args.sizes:
        if over_budget(f"{task} at {num_envs} worlds"):
            return
        try:
            env = make_env(task, num_envs, args.device)
        except NotImplementedError as err:  # a model feature mujoco_warp lacks
            note(f"task '{task}' cannot run on mujoco_warp: {err}")
            return
        substeps = env.cfg.sim.decimation
        env_rate = env_steps_per_s(env, args.steps, args.warmup)
        raw_rate = raw_steps_per_s(env.scene.model, env.sim.qpos, env.sim.qvel, substeps, args.steps, args.device)
        env.close()
        del env
        row = {"num_envs": num_envs, "substeps": substeps, "env_steps_per_s": env_rate,
               "raw_steps_per_s": raw_rate, "ratio": env_rate / raw_rate}
        result["throughput"].append(row)
        save()
        print(f"{task:12s} {num_envs:6d} {substeps:4d} {env_rate:12.0f} {raw_rate:12.0f} {row['ratio']:6.2f}")
    if over_budget(f"{task} PPO breakdown"):
        return
    env = make_env(task, args.ppo_envs, args.device)
    ppo = result["ppo"] = ppo_iteration_times(env, task, args.ppo_iterations, args.ppo_rollout)
    env.close()
    del env
    save()
    print(f"{task:12s} PPO at {ppo['num_envs']} envs x {ppo['num_steps_per_env']} steps: "
          f"iteration {ppo['iteration_s']:.3f} s = collect {ppo['collect_s']:.3f} s "
          f"({100 * ppo['collect_fraction']:.0f} %) + learn {ppo['learn_s']:.3f} s; "
          f"{ppo['env_steps_per_s_in_training']:.0f} env steps/s in training")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda:0", help="Warp/torch device: cuda:0, or cpu for a smoke run")
    parser.add_argument("--quick", action="store_true", help=f"tiny sizes {QUICK_SIZES} and few steps (CPU smoke run)")
    parser.add_argument("--tasks", nargs="*", default=list(TASKS))
    parser.add_argument("--sizes", nargs="*", type=int, default=None, help=f"world counts (default {SIZES})")
    parser.add_argument("--steps", type=int, default=None, help="timed env steps per measurement (default 200)")
    parser.add_argument("--ppo-envs", type=int, default=None, help="worlds for the PPO breakdown (default 4096)")
    parser.add_argument("--budget-s", type=float, default=330.0,
                        help="start no measurement after this many seconds (a cold kernel compile of a new model "
                             "can take minutes on top)")
    parser.add_argument("--out", default=None, help="write the figures as JSON (rewritten after every figure)")
    args = parser.parse_args()
    args.sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
    args.steps = args.steps or (5 if args.quick else 200)
    args.warmup = 3 if args.quick else 20
    args.ppo_envs = args.ppo_envs or (QUICK_SIZES[-1] if args.quick else 4096)
    args.ppo_iterations, args.ppo_rollout = (2, 4) if args.quick else (3, None)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: torch sees no CUDA device (use --device cpu --quick for a smoke run)")

    started = time.perf_counter()
    gpu = torch.cuda.get_device_name(args.device) if args.device.startswith("cuda") else None
    report = {"device": args.device, "gpu": gpu, "quick": args.quick, "timed_env_steps": args.steps, "tasks": {},
              "notes": []}

    def save() -> None:
        report["elapsed_s"] = time.perf_counter() - started
        if args.out:
            with open(args.out, "w") as f:
                json.dump(report, f, indent=2)

    def note(text: str) -> None:
        print(f"note: {text}")
        report["notes"].append(text)
        save()

    def over_budget(what: str) -> bool:
        if time.perf_counter() - started > args.budget_s:
            note(f"skipped {what}: past the {args.budget_s:.0f} s budget")
            return True
        return False

    print(f"device {args.device}{f' ({gpu})' if gpu else ''}, {args.steps} timed env steps per figure")
    print(f"{'task':12s} {'envs':>6s} {'sub':>4s} {'env steps/s':>12s} {'raw steps/s':>12s} {'ratio':>6s}")
    registered = {t.name for t in list_tasks()}
    for task in args.tasks:
        if task not in registered:
            note(f"task '{task}' is not registered in batonlab.tasks; skipped")
            continue
        try:
            bench_task(task, args, report, note, over_budget, save)
        except Exception as err:  # keep the figures of the other tasks
            note(f"task '{task}' failed: {type(err).__name__}: {err}")
    rows = [r for r in report["tasks"].get("wl_velocity", {}).get("throughput", []) if r["num_envs"] == 4096]
    if rows:
        print(f"wl_velocity at 4096 worlds: {rows[0]['env_steps_per_s']:.0f} env steps/s "
              f"({rows[0]['env_steps_per_s'] / 200e3:.2f} x the 200k target of ARCHITECTURE §9)")
    save()
    print(f"total {report['elapsed_s']:.0f} s")


if __name__ == "__main__":
    main()
