# SPDX-License-Identifier: BSD-3-Clause
"""The arm's tool Jacobian: batched `TorchChain` vs MuJoCo's `mj_jacSite` on the same model, in one process.

    python bench/ik_chain.py [--num-envs 1 64 512 4096] [--repeats 50] [--threads 1]

For each batch size it prints Jacobians/s of `TorchChain.jacobian` (what the IK-residual and tool-step
actions evaluate every control step), of its damped least-squares step (`dls_step`, pose target), and of
the CPU baseline the action would otherwise run: one `mj_kinematics` + `mj_comPos` + `mj_jacSite` per
world (the forward kinematics the Jacobian needs, no dynamics), with their ratios; and, once, the robot
side's numpy `KinematicChain.jacobian` against the same baseline. Ratios above 1: the torch twin is faster.
"""

from __future__ import annotations

import argparse
import time

import mujoco
import numpy as np
import torch

from batonlab.actions.ik import TorchChain
from batonlab.robots.arm6 import ARM_JOINTS, EE_SITE
from batonlab.robots.assets import compile_spec
from batonlab.robots.kinematics import chain_from_model
from batonlab.tasks.wl_loco_manip import IK_DAMPING, IK_ORIENTATION_WEIGHT, make_loco_manip_scene_spec


def per_second(work, count: int, repeats: int) -> float:
    """`count` × calls per second of `work()` over `repeats` calls, after one warm-up call."""
    work()
    start = time.perf_counter()
    for _ in range(repeats):
        work()
    return count * repeats / (time.perf_counter() - start)


def mujoco_jacobians(model: mujoco.MjModel, data: mujoco.MjData, q: np.ndarray, qpos_ids: list[int], site: int):
    """The tool Jacobian of every row of q (N, n) with MuJoCo, one world at a time: (N, 6, nv)."""
    jac = np.zeros((q.shape[0], 6, model.nv))
    for row, values in enumerate(q):
        data.qpos[qpos_ids] = values
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_jacSite(model, data, jac[row, :3], jac[row, 3:], site)
    return jac


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 64, 512, 4096])
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (MuJoCo's baseline runs on one)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = compile_spec(make_loco_manip_scene_spec())
    data = mujoco.MjData(model)
    chain = chain_from_model(model, "arm_base", EE_SITE, ARM_JOINTS)
    torch_chain = TorchChain(chain)
    ids = [model.joint(j).id for j in ARM_JOINTS]
    qpos_ids = [int(model.jnt_qposadr[i]) for i in ids]
    site = model.site(EE_SITE).id
    low, high = model.jnt_range[ids].T
    rng = np.random.default_rng(0)
    print(f"[ik_chain] arm6 on the wheel-legged base, {len(ids)} hinges, torch {args.threads} thread(s); Jacobians/s")
    print(f"{'envs':>6} {'mj_jacSite':>12} {'TorchChain':>12} {'ratio':>7} {'dls_step':>12} {'ratio':>7}")
    for num in args.num_envs:
        q = rng.uniform(low, high, size=(num, len(ids)))
        q_torch = torch.as_tensor(q, dtype=torch.float32)
        target_pos, target_rot = torch_chain.jacobian(q_torch.flip(0))[:2]
        repeats = max(3, args.repeats * 64 // max(num, 64))
        baseline = per_second(lambda: mujoco_jacobians(model, data, q, qpos_ids, site), num, repeats)
        batched = per_second(lambda: torch_chain.jacobian(q_torch), num, repeats)
        step = per_second(lambda: torch_chain.dls_step(q_torch, target_pos, IK_DAMPING, target_rot, IK_ORIENTATION_WEIGHT),
                          num, repeats)
        print(f"{num:>6} {baseline:>12.0f} {batched:>12.0f} {batched / baseline:>7.2f} {step:>12.0f} {step / baseline:>7.2f}")
    q = rng.uniform(low, high, size=len(ids))
    baseline = per_second(lambda: mujoco_jacobians(model, data, q[None], qpos_ids, site), 1, args.repeats * 20)
    robot = per_second(lambda: chain.jacobian(q), 1, args.repeats * 20)
    print(f"[ik_chain] robot side, one arm: numpy KinematicChain {robot:.0f}/s, mj_jacSite {baseline:.0f}/s, "
          f"ratio {robot / baseline:.2f}")


if __name__ == "__main__":
    main()
