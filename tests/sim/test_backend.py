# SPDX-License-Identifier: BSD-3-Clause
"""The CPU backend: determinism, partial resets, divergence handling, per-world parameters."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from batonlab.sim import make_backend
from batonlab.sim.mujoco_cpu import MujocoCpuBackend


def _swinging(backend: MujocoCpuBackend) -> None:
    n = backend.num_envs
    backend.reset(torch.arange(n), torch.full((n, 1), 0.5), torch.zeros(n, 1))


def test_step_matches_mujoco_reference(pendulum_model):
    """Rollout stepping agrees with plain mj_step on the same model."""
    import mujoco

    backend = make_backend("mujoco", pendulum_model, num_envs=3)
    _swinging(backend)
    backend.ctrl[:] = 0.2
    for _ in range(10):
        backend.step(4)
    data = mujoco.MjData(pendulum_model)
    data.qpos[:] = 0.5
    data.ctrl[:] = 0.2
    for _ in range(40):
        mujoco.mj_step(pendulum_model, data)
    np.testing.assert_allclose(backend.qpos.numpy(), np.tile(data.qpos, (3, 1)), atol=1e-6)
    assert backend.time[0].item() == pytest.approx(40 * 0.005)


def test_deterministic_for_fixed_inputs(pendulum_model):
    runs = []
    for _ in range(2):
        backend = make_backend("mujoco", pendulum_model, num_envs=4)
        _swinging(backend)
        generator = torch.Generator().manual_seed(3)
        for _ in range(20):
            backend.ctrl[:] = torch.rand(4, 1, generator=generator)
            backend.step(4)
        runs.append(backend.qpos.clone())
    assert torch.equal(runs[0], runs[1])


def test_partial_reset_leaves_other_worlds_untouched(pendulum_model):
    backend = make_backend("mujoco", pendulum_model, num_envs=4)
    _swinging(backend)
    for _ in range(5):
        backend.step(4)
    before = backend.qpos.clone(), backend.qvel.clone(), backend.sensordata.clone()
    backend.reset(torch.tensor([1, 3]), torch.tensor([[0.1], [-0.2]]), torch.tensor([[0.0], [1.0]]))
    for tensor, old in zip((backend.qpos, backend.qvel, backend.sensordata), before):
        assert torch.equal(tensor[[0, 2]], old[[0, 2]])
    assert backend.qpos[1].item() == pytest.approx(0.1) and backend.qvel[3].item() == pytest.approx(1.0)
    assert backend.time[1].item() == 0.0 and backend.time[0].item() > 0.0
    # Sensors of reset worlds describe the new state at once: the tip hangs at angle 0.1.
    assert backend.sensor("hinge_pos")[1].item() == pytest.approx(0.1, abs=1e-6)
    assert backend.sensor("tip_pos")[1, 0].item() == pytest.approx(-0.5 * np.sin(0.1), abs=1e-5)


def test_nan_world_is_reset_and_counted(pendulum_model):
    backend = make_backend("mujoco", pendulum_model, num_envs=4)
    _swinging(backend)
    backend.step(4)
    healthy = backend.qpos.clone()
    backend._state[2, backend._offsets["qvel"][0]] = np.nan  # inject a blow-up into world 2
    backend.step(4)
    assert backend.diverged.tolist() == [False, False, True, False]
    assert backend.num_diverged_total == 1
    assert torch.isfinite(backend.qpos).all() and torch.isfinite(backend.sensordata).all()
    assert backend.qpos[2].item() == pytest.approx(0.0)  # back at the default state
    assert not torch.allclose(backend.qpos[[0, 1, 3]], healthy[[0, 1, 3]])  # the others kept moving
    backend.step(4)
    assert not backend.diverged.any()


def test_exploding_velocity_counts_as_divergence(pendulum_model):
    backend = make_backend("mujoco", pendulum_model, num_envs=2, max_joint_velocity=50.0)
    backend.reset(torch.tensor([0, 1]), torch.zeros(2, 1), torch.tensor([[0.0], [500.0]]))
    backend.step(1)
    assert backend.diverged.tolist() == [False, True]


def test_per_world_parameters_take_effect(pendulum_model):
    backend = make_backend("mujoco", pendulum_model, num_envs=2)
    backend.reset(torch.tensor([0, 1]), torch.zeros(2, 1), torch.full((2, 1), 3.0))
    backend.set_params(torch.tensor([1]), dof_damping=torch.tensor([[5.0]]))
    assert backend.get_params("dof_damping")[:, 0].tolist() == [0.1, 5.0]
    for _ in range(10):
        backend.step(4)
    # The heavily damped world has lost much more of its swing velocity.
    assert abs(backend.qvel[1].item()) < 0.5 * abs(backend.qvel[0].item())
    assert pendulum_model.dof_damping[0] == pytest.approx(0.1)  # the template is untouched


def test_bad_parameter_names_and_shapes_are_rejected(pendulum_model):
    backend = make_backend("mujoco", pendulum_model, num_envs=2)
    with pytest.raises(KeyError, match="not an array field"):
        backend.set_params(torch.tensor([0]), dof_dampening=torch.zeros(1, 1))
    with pytest.raises(ValueError, match="expected shape"):
        backend.set_params(torch.tensor([0]), dof_damping=torch.zeros(2, 1))
    with pytest.raises(KeyError, match="unknown sensor"):
        backend.sensor("nope")
    with pytest.raises(ValueError, match="unknown sim backend"):
        make_backend("physx", pendulum_model, num_envs=1)


def test_render_offscreen(pendulum_model):
    backend = make_backend("mujoco", pendulum_model, num_envs=2)
    frames = backend.render([0, 1], camera=-1, size=(48, 64))
    assert frames.shape == (2, 48, 64, 3) and frames.dtype == np.uint8
    assert frames.std() > 0  # not a blank image
