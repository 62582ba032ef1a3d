# SPDX-License-Identifier: BSD-3-Clause
"""Per-joint known-answer fits on more data than the tests record, with and without the training's sensor noise.

    python bench/sysid_known_answer.py [--robots arm legs] [--bags 8 32] [--noise clean noisy] [--max-iters 10]
                                       [--out bench_results/sysid_known_answer]

The "robot" is the simulator with a fit written over it and its joint randomisation off, with one of two truths:
`uniform` (the tests': armature ×3, damping ×0.5, friction loss 0.3 N·m on every fitted joint) or `varied` (each
joint its own, drawn once: armature ×2–4, damping ×0.3–0.7, friction loss 0.15–0.45 N·m); both with one control
period (20 ms) of command delay. `arm`: 2 s arm_reach episodes, the arm driven by sums of sines (bench/sysid_dr.py's
recorder). `legs`: 2 s wl_balance episodes driven by a balancing policy trained here on the tests' fixture budget.
Each row fits armature, damping and friction loss per joint and the delay, coarse to fine as `batonlab sysid` does,
on the first N bags (every 4th held out), clean or with the joint-state noise of the task's policy observation.
Printed per row: the worst relative error of each group over the joints, the delay, the held-out joint-position RMSE
before and after, and the fit's wall time; `results.json` keeps every number.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from batonlab.cli import train as cli_train
from batonlab.cli.common import build_invocation
from batonlab.env.env import BatonEnv
from batonlab.env.scene import scene_spec
from batonlab.logs.bag_reader import open_bag
from batonlab.logs.sim_recorder import EpisodeRecorder
from batonlab.rl.evaluate import evaluate
from batonlab.robots.arm6 import ARM_JOINTS
from batonlab.robots.fitted import FitOverlay, group_value, write_fit
from batonlab.sysid.fit import fit_segments, split_segments
from batonlab.sysid.parameters import coarse_parameters, joint_parameters, joint_values
from batonlab.sysid.sequences import bag_segments
from sysid_dr import record as record_arm

GROUPS = ["armature", "damping", "frictionloss"]
LEGS = ["left_hip_pitch", "left_knee_pitch", "right_hip_pitch", "right_knee_pitch"]
ROBOTS = {
    "arm": {"task": "arm_reach", "joints": list(ARM_JOINTS), "delayed": list(ARM_JOINTS),
            "noise": {"position": "joint_pos", "velocity": "joint_vel"}, "randomization": ("joint_params",)},
    "legs": {"task": "wl_balance", "joints": LEGS, "delayed": LEGS + ["left_wheel", "right_wheel"],
             "noise": {"position": "leg_pos", "velocity": "leg_vel"},
             "randomization": ("wheel_friction", "base_mass", "actuator_gains", "action_delay", "push")},
}
"""Per robot: the task, the fitted joints, the delayed ones, the observation terms whose noise the joint states get,
and the randomisation the changed simulator leaves out (it is one robot, not a draw)."""


def truth_overlay(robot: dict, kind: str) -> FitOverlay:
    """The changed simulator's overlay: `uniform` or `varied` values over the task's nominal model."""
    cfg = build_invocation([f"task={robot['task']}"], play=True).task
    nominal, _ = scene_spec(cfg.scene, cfg.sim)
    rng = np.random.default_rng(0)
    values = {}
    for joint in robot["joints"]:
        armature, damping, friction = (3.0, 0.5, 0.3) if kind == "uniform" else (
            rng.uniform(2.0, 4.0), rng.uniform(0.3, 0.7), rng.uniform(0.15, 0.45))
        values[joint] = {"armature": armature * group_value(nominal, joint, "armature"),
                         "damping": damping * group_value(nominal, joint, "damping"), "frictionloss": friction}
    return FitOverlay(values=values, command_delay_s=0.02, delayed_joints=robot["delayed"])


def record_legs(truth: Path, out: Path, episodes: int, policy) -> list[Path]:
    """`episodes` 2 s wl_balance episodes of the changed simulator, driven by `policy`, recorded as `play record=`."""
    cfg = build_invocation(["task=wl_balance"], play=True).task
    for name in ROBOTS["legs"]["randomization"]:
        del cfg.events[name]
    cfg.scene.fit, cfg.episode_length_s, cfg.num_envs, cfg.seed = str(truth), 2.0, episodes, 0
    env = BatonEnv(cfg)
    recorder = EpisodeRecorder(env, out, episodes, "wl_balance", prefix="wl_balance")
    evaluate(env, policy, progress=False, step_callback=recorder)
    env.close()
    return recorder.close()


def fit_row(robot: dict, truth: FitOverlay, bags: list[Path], noisy: bool, max_iters: int) -> dict:
    """One coarse-to-fine per-joint fit of `bags`: the worst relative error per group, the delay, RMSE, time."""
    logs = [open_bag(path) for path in bags]
    cfg = build_invocation([f"task={robot['task']}"], play=True).task
    if noisy:
        terms = cfg.observations["policy"].terms
        rng = np.random.default_rng(1)
        for log in logs:
            states = log.joint_states
            states.position += rng.normal(0.0, terms[robot["noise"]["position"]].noise_std, states.position.shape)
            states.velocity += rng.normal(0.0, terms[robot["noise"]["velocity"]].noise_std, states.velocity.shape)
    spec, _ = scene_spec(cfg.scene, cfg.sim)
    nominal, _ = scene_spec(cfg.scene, cfg.sim)
    joints = robot["joints"]
    segments = [s for log in logs for s in bag_segments(log, spec, joints, max_delay_s=0.04)]
    start = time.perf_counter()
    result = fit_segments(joint_parameters(spec, joints, GROUPS), *split_segments(segments), max_iters=max_iters,
                          coarse=coarse_parameters(spec, joints, GROUPS))
    wall_s = time.perf_counter() - start
    fitted = joint_values(result.fitted, nominal, joints)
    errors = {g: max(abs(fitted[j][g] / truth.values[j][g] - 1.0) for j in joints) for g in GROUPS}
    half_widths = joint_values(result.fitted, nominal, joints, result.half_width_95)
    covered = sum(abs(fitted[j][g] - truth.values[j][g]) <= half_widths[j][g] for j in joints for g in GROUPS)
    return {"bags": len(bags), "noisy": noisy, "data_s": sum(s.duration_s for s in segments),
            "worst_rel_error": errors, "delay_s": result.command_delay_s, "start": result.start,
            "start_rmse_rad": result.start_rmse_rad, "noisy_velocities": any(s.noisy_velocities for s in segments),
            "half_width_95": half_widths, "truth_in_95": [int(covered), len(joints) * len(GROUPS)],
            "rmse_rad": result.rmse_rad, "fit_wall_s": wall_s, "fitted": fitted}


def balancing_policy(out: Path):
    """wl_balance trained as the tests' session fixture trains it (256 envs, 64 iterations)."""
    inv = build_invocation(["task=wl_balance", "env.num_envs=256", "max_iterations=64", f"log_root={out / 'logs'}",
                            "eval_episodes=0", "progress=false"])
    return cli_train.train(inv).policy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--robots", nargs="+", choices=list(ROBOTS), default=list(ROBOTS))
    parser.add_argument("--truths", nargs="+", choices=["uniform", "varied"], default=["uniform", "varied"])
    parser.add_argument("--bags", type=int, nargs="+", default=[8, 32])
    parser.add_argument("--noise", nargs="+", choices=["clean", "noisy"], default=["clean", "noisy"])
    parser.add_argument("--max-iters", type=int, default=10)
    parser.add_argument("--out", type=Path, default=Path("bench_results/sysid_known_answer"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    rows = []
    policy = balancing_policy(args.out) if "legs" in args.robots else None
    for name in args.robots:
        robot = ROBOTS[name]
        for kind in args.truths:
            truth = truth_overlay(robot, kind)
            truth_path = write_fit(args.out / f"{name}_{kind}_truth.yaml", truth)
            bag_dir = args.out / f"{name}_{kind}_bags"
            bags = (record_arm(truth_path, bag_dir, max(args.bags)) if name == "arm"
                    else record_legs(truth_path, bag_dir, max(args.bags), policy))
            for count in args.bags:
                for noisy in [label == "noisy" for label in args.noise]:
                    row = {"robot": name, "truth": kind, **fit_row(robot, truth, bags[:count], noisy, args.max_iters)}
                    rows.append(row)
                    (args.out / "results.json").write_text(json.dumps(rows, indent=2))
                    errors = " ".join(f"{g} {e:.3f}" for g, e in row["worst_rel_error"].items())
                    before, after = row["rmse_rad"]["validation"]
                    print(f"[sysid_known_answer] {name} {kind} {count} bags ({row['data_s']:.0f} s) "
                          f"{'noisy' if noisy else 'clean'}: worst {errors}; delay {row['delay_s'] * 1e3:.1f} ms; "
                          f"held-out {before:.3g} -> {after:.3g} rad; start {row['start']}; "
                          f"truth inside the 95 % interval {row['truth_in_95'][0]}/{row['truth_in_95'][1]}; "
                          f"{'positions only; ' if row['noisy_velocities'] else ''}"
                          f"{row['fit_wall_s']:.0f} s", flush=True)


if __name__ == "__main__":
    main()
