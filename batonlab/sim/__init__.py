# SPDX-License-Identifier: BSD-3-Clause
"""Physics backends: N worlds of one MuJoCo model exposed as torch tensors."""

from __future__ import annotations

import mujoco

from batonlab.sim.backend import SimBackend

BACKENDS = ("mujoco", "mujoco_warp")
"""Backend names accepted by `make_backend` (and `sim.backend=` on the command line)."""


def make_backend(
    name: str, model: mujoco.MjModel, num_envs: int, device: str = "cpu", num_threads: int = 0, **kwargs
) -> SimBackend:
    """Build the backend called `name` for `num_envs` worlds of `model`."""
    if name == "mujoco":
        from batonlab.sim.mujoco_cpu import MujocoCpuBackend

        if device != "cpu":
            raise ValueError(f"the 'mujoco' backend runs on the CPU; got device={device!r} (use sim.backend=mujoco_warp)")
        return MujocoCpuBackend(model, num_envs, num_threads=num_threads, **kwargs)
    if name == "mujoco_warp":
        from batonlab.sim.mujoco_warp import MujocoWarpBackend

        return MujocoWarpBackend(model, num_envs, device=device, **kwargs)
    raise ValueError(f"unknown sim backend '{name}'; valid backends: {list(BACKENDS)}")
