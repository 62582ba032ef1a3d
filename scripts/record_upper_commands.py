# SPDX-License-Identifier: BSD-3-Clause
"""Record the commands the wheel-legged tasks' experts issue over the scripted lower level, for `wl_loco_manip_upper`.

    python scripts/record_upper_commands.py [--tasks wl_baton wl_chase wl_door] [--episodes 64] [--seed 0]
                                            [--out build/upper_commands.npz]

Each task's expert runs `--episodes` play episodes (one per env) of `<task>_scripted`; every control step's base speed,
yaw rate and tool pose is kept until the episode ends. The file joins all tasks' episodes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from batonlab.events.upper_commands import CommandRecording
from batonlab.tasks.upper_commands import record_expert_commands


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", default=["wl_baton", "wl_chase", "wl_door"])
    parser.add_argument("--episodes", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("build/upper_commands.npz"))
    args = parser.parse_args()
    recordings = []
    for task in args.tasks:
        recording = record_expert_commands(task, args.episodes, args.seed, progress=True)
        speed, yaw_rate = np.abs(recording.velocity[..., 0]), np.abs(recording.velocity[..., 1])
        recorded = recording.recorded
        print(f"[record_upper_commands] {task}: {len(recording.lengths)} episodes, {int(recording.lengths.sum())} steps; "
              f"|speed| {speed[recorded].mean():.3f} m/s (max {speed[recorded].max():.2f}), |yaw rate| "
              f"{yaw_rate[recorded].mean():.3f} rad/s (max {yaw_rate[recorded].max():.2f})", flush=True)
        recordings.append(recording)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    CommandRecording.join(recordings).save(args.out)
    print(f"[record_upper_commands] wrote {args.out}")


if __name__ == "__main__":
    main()
