# SPDX-License-Identifier: BSD-3-Clause
"""Quaternion conversions the command layer and the door expert use: rotation vectors and matrices round-trip, and
agree with MuJoCo's own conversions."""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from batonlab.utils.quaternions import (quat_canonical, quat_from_matrix, quat_from_rotation_vector, quat_to_matrix,
                                        rotation_vector_from_quat)


def _random_quats(count: int) -> torch.Tensor:
    q = torch.randn(count, 4, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    return quat_canonical(q / q.norm(dim=1, keepdim=True))


def test_matrix_and_rotation_vector_round_trips():
    q = _random_quats(2000)
    assert torch.allclose(quat_from_matrix(quat_to_matrix(q)), q, atol=1e-9)
    vectors = rotation_vector_from_quat(q)
    assert vectors.norm(dim=1).max() <= torch.pi + 1e-9
    assert torch.allclose(quat_canonical(quat_from_rotation_vector(vectors)), q, atol=1e-9)
    tiny = torch.tensor([[1e-9, -2e-9, 0.0], [0.0, 0.0, 0.0]], dtype=torch.float64)  # no division by a zero angle
    assert torch.allclose(rotation_vector_from_quat(quat_from_rotation_vector(tiny)), tiny, atol=1e-15)


def test_conversions_agree_with_mujoco():
    for q in _random_quats(50).numpy():
        vector = np.zeros(3)
        mujoco.mju_quat2Vel(vector, q, 1.0)  # the rotation vector of q over unit time
        ours = rotation_vector_from_quat(torch.as_tensor(q)[None])[0].numpy()
        np.testing.assert_allclose(ours, vector, atol=1e-9)
        matrix = np.zeros(9)
        mujoco.mju_quat2Mat(matrix, q)
        np.testing.assert_allclose(quat_from_matrix(torch.as_tensor(matrix.reshape(1, 3, 3)))[0].numpy(), q, atol=1e-9)
