# SPDX-License-Identifier: BSD-3-Clause
"""What the test suite's session fixtures cost: each training of `tests/fixture_trainings.py`, run as
the fixture runs it (`batonlab train`'s own entry), with its wall time, env steps/s, the share of the
learner, and the ratio of its env steps/s to bare `mujoco.rollout` on the same worlds in this process.

    python bench/suite_cost.py [--fixtures arm_reach_policy ...] [--out results.json]

The learning itself (success, survival) is the tests' to judge; this prints what it took.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from cli_training import train_run  # noqa: E402
from env_throughput import raw_rollout_steps_per_s  # noqa: E402
from fixture_trainings import TRAININGS  # noqa: E402

from batonlab.env.env import BatonEnv  # noqa: E402
from batonlab.tasks import make_task_cfg  # noqa: E402


def raw_baseline(task: str, num_envs: int, env_steps: int = 50) -> float:
    """Env-equivalent steps/s of bare `mujoco.rollout` on the task's own (randomised) worlds and decimation."""
    cfg = make_task_cfg(task)
    cfg.num_envs = num_envs
    env = BatonEnv(cfg)
    try:
        return raw_rollout_steps_per_s(list(env.sim._models), env.sim._state.copy(), cfg.sim.decimation, env_steps,
                                       env.sim.num_threads)
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fixtures", nargs="*", default=list(TRAININGS), choices=list(TRAININGS))
    parser.add_argument("--out", default=None, help="write the rows as JSON")
    args = parser.parse_args()
    rows = []
    print(f"{'fixture':22s} {'env steps':>10s} {'wall s':>7s} {'steps/s':>8s} {'learner':>8s} {'raw/s':>8s} {'ratio':>6s}")
    for name in args.fixtures:
        training = TRAININGS[name]
        collect = learn = 0.0

        def timing(_, stats):
            nonlocal collect, learn
            collect += stats["Perf/collection_time_s"]
            learn += stats["Perf/learning_time_s"]

        with tempfile.TemporaryDirectory() as root:
            run = train_run(training.task, Path(root), *training.overrides, on_iteration=timing)
        rate = run.env_steps / run.wall_s
        raw = raw_baseline(training.task, training.num_envs)
        row = {"fixture": name, "task": training.task, "num_envs": training.num_envs, "iterations": training.iterations,
               "env_steps": run.env_steps, "wall_s": run.wall_s, "env_steps_per_s": rate,
               "learner_share": learn / (collect + learn), "raw_rollout_steps_per_s": raw, "ratio": rate / raw}
        rows.append(row)
        print(f"{name:22s} {run.env_steps:10d} {run.wall_s:7.1f} {rate:8.0f} {row['learner_share']:8.2f} {raw:8.0f} "
              f"{row['ratio']:6.2f}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
