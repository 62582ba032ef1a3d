# SPDX-License-Identifier: BSD-3-Clause
"""Batched quaternion math on torch tensors: (w, x, y, z), batch first."""

from __future__ import annotations

import torch


def quat_rotate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors v (N, 3) by unit quaternions q (N, 4)."""
    w, u = q[:, :1], q[:, 1:]
    t = 2.0 * torch.cross(u, v, dim=-1)
    return v + w * t + torch.cross(u, t, dim=-1)


def quat_rotate_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors v (N, 3) by the inverse of unit quaternions q (N, 4): world → body."""
    w, u = q[:, :1], q[:, 1:]
    t = 2.0 * torch.cross(u, v, dim=-1)
    return v - w * t + torch.cross(u, t, dim=-1)


def quat_from_euler_xyz(roll: torch.Tensor, pitch: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    """Quaternions (N, 4) of intrinsic z-y-x rotations (yaw, then pitch, then roll) [rad]."""
    cr, sr = torch.cos(roll / 2), torch.sin(roll / 2)
    cp, sp = torch.cos(pitch / 2), torch.sin(pitch / 2)
    cy, sy = torch.cos(yaw / 2), torch.sin(yaw / 2)
    return torch.stack(
        (cr * cp * cy + sr * sp * sy, sr * cp * cy - cr * sp * sy, cr * sp * cy + sr * cp * sy, cr * cp * sy - sr * sp * cy),
        dim=-1,
    )


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product a ⊗ b of quaternions (N, 4) wxyz."""
    # Component c is sum_k sign[k, c] * a_k * b_(index[k, c]), summed in order k = 0..3: the textbook
    # formula (w = aw bw - ax bx - ay by - az bz, ...) term for term, in six tensor ops instead of thirty.
    terms = a.unsqueeze(-1) * b[:, _QUAT_MUL_INDEX] * _QUAT_MUL_SIGN.to(device=a.device, dtype=a.dtype)
    return terms[:, 0] + terms[:, 1] + terms[:, 2] + terms[:, 3]


_QUAT_MUL_INDEX = torch.tensor([[0, 1, 2, 3], [1, 0, 3, 2], [2, 3, 0, 1], [3, 2, 1, 0]])
"""index[k, c]: the component of b that a_k multiplies in component c of a ⊗ b."""


_QUAT_MUL_SIGN = torch.tensor([[1.0, 1.0, 1.0, 1.0], [-1.0, 1.0, -1.0, 1.0], [-1.0, 1.0, 1.0, -1.0],
                               [-1.0, -1.0, 1.0, 1.0]])
"""sign[k, c] of the term a_k b_(index[k, c]) in component c."""


def yaw_from_quat(q: torch.Tensor) -> torch.Tensor:
    """Heading angle (N,) of quaternions (N, 4) [rad]."""
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def yaw_to_quat(yaw: torch.Tensor) -> torch.Tensor:
    """(n,) heading [rad] → (n, 4) quaternion (w, x, y, z)."""
    half = yaw / 2
    zero = torch.zeros_like(yaw)
    return torch.stack([torch.cos(half), zero, zero, torch.sin(half)], dim=1)


def quat_canonical(q: torch.Tensor) -> torch.Tensor:
    """q (..., 4) in the hemisphere w >= 0 (q and -q are one orientation)."""
    return torch.where(q[..., :1] < 0, -q, q)


def quat_angle_between(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The rotation angle (...) [rad] in [0, π] between unit quaternions a and b (..., 4), either sign."""
    dot = (a * b).sum(-1).abs().clamp(max=1.0)
    return 2.0 * torch.acos(dot)


def quat_slerp(a: torch.Tensor, b: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """Spherical interpolation from a to b (N, 4) at fractions t (N,) in [0, 1], along the shorter arc."""
    dot = (a * b).sum(-1, keepdim=True)
    b = torch.where(dot < 0, -b, b)
    dot = dot.abs().clamp(max=1.0)
    angle = torch.acos(dot)
    t = t.unsqueeze(-1)
    sin = torch.sin(angle)
    near = sin < 1e-6  # (almost) the same orientation: linear interpolation is exact enough
    safe = torch.where(near, torch.ones_like(sin), sin)
    wa = torch.where(near, 1.0 - t, torch.sin((1.0 - t) * angle) / safe)
    wb = torch.where(near, t, torch.sin(t * angle) / safe)
    q = wa * a + wb * b
    return q / torch.linalg.vector_norm(q, dim=-1, keepdim=True)


def quat_to_matrix(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrices (..., 3, 3) of unit quaternions q (..., 4) (w, x, y, z)."""
    w, x, y, z = q.unbind(-1)
    return torch.stack([
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    ], dim=-1).reshape(*q.shape[:-1], 3, 3)


def quat_from_rotation_vector(vectors: torch.Tensor) -> torch.Tensor:
    """Unit quaternions (..., 4) (w, x, y, z) of rotation vectors (..., 3) (axis times angle [rad])."""
    angle = torch.linalg.vector_norm(vectors, dim=-1, keepdim=True)
    half = 0.5 * angle
    # sin(θ/2)/θ, with its limit 1/2 at θ = 0.
    factor = torch.where(angle > 1e-6, torch.sin(half) / angle.clamp_min(1e-12), 0.5 - angle * angle / 48.0)
    return torch.cat([torch.cos(half), vectors * factor], dim=-1)


def rotation_vector_from_quat(q: torch.Tensor) -> torch.Tensor:
    """Rotation vectors (..., 3) [rad], angle in [0, π], of unit quaternions q (..., 4) (the inverse of
    `quat_from_rotation_vector`; q and -q give the same vector)."""
    q = quat_canonical(q)
    sin_half = torch.linalg.vector_norm(q[..., 1:], dim=-1, keepdim=True)
    angle = 2.0 * torch.atan2(sin_half, q[..., :1])
    factor = torch.where(sin_half > 1e-6, angle / sin_half.clamp_min(1e-12), 2.0 / q[..., :1].clamp_min(1e-12))
    return q[..., 1:] * factor


def quat_from_matrix(rot: torch.Tensor) -> torch.Tensor:
    """Unit quaternions (..., 4) (w, x, y, z), w >= 0, of rotation matrices (..., 3, 3) (the inverse of `quat_to_matrix`)."""
    m = rot
    trace = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    # Four candidates, each exact where its largest component is not small; take the best conditioned one.
    candidates = torch.stack([
        torch.stack([1.0 + trace, m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]], -1),
        torch.stack([m[..., 2, 1] - m[..., 1, 2], 1.0 + m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2],
                     m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0]], -1),
        torch.stack([m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0],
                     1.0 - m[..., 0, 0] + m[..., 1, 1] - m[..., 2, 2], m[..., 1, 2] + m[..., 2, 1]], -1),
        torch.stack([m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1],
                     1.0 - m[..., 0, 0] - m[..., 1, 1] + m[..., 2, 2]], -1),
    ], dim=-2)  # (..., 4, 4): candidate k has 4 q_k² on its k-th entry
    best = torch.stack([1.0 + trace, 1.0 + m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2],
                        1.0 - m[..., 0, 0] + m[..., 1, 1] - m[..., 2, 2], 1.0 - m[..., 0, 0] - m[..., 1, 1] + m[..., 2, 2]],
                       -1).argmax(-1)
    q = torch.gather(candidates, -2, best[..., None, None].expand(*best.shape, 1, 4)).squeeze(-2)
    return quat_canonical(q / torch.linalg.vector_norm(q, dim=-1, keepdim=True))
