# SPDX-License-Identifier: BSD-3-Clause
"""An arm's kinematic chain on the robot side (numpy only): forward kinematics, the tool point's Jacobian
and the damped least-squares step that `ik_residual` arm actions add the policy's residual to.

The chain is what the manifest carries (`KinematicChain.to_json`), read from the MJCF at export
(`batonlab.robots.kinematics.chain_from_model`); training computes the same step batched in torch
(`batonlab.actions.ik.TorchChain`). Frames: everything is in the chain's base frame (the arm base: the
frame of `ee_pos_b` and of `commands/ee_target`); joints are hinges, positions in radians.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from batonlab.deploy.manifest_json import ManifestError


@dataclass(frozen=True)
class ChainLink:
    """One body of the chain: its fixed placement in its parent, then (optionally) one hinge."""

    pos: tuple[float, float, float]
    """Body origin in the parent body's frame [m]."""
    quat: tuple[float, float, float, float]
    """Body orientation in the parent body's frame (w, x, y, z)."""
    joint: str | None
    """The hinge moving this body (None: fixed to its parent)."""
    axis: tuple[float, float, float] = (0.0, 0.0, 1.0)
    """Hinge axis in the body frame (unit)."""
    anchor: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """A point of the hinge axis in the body frame [m]."""


@dataclass(frozen=True)
class KinematicChain:
    """A serial chain of hinges from the arm base to the tool point."""

    base: str
    """The body whose frame is the chain's base frame."""
    links: tuple[ChainLink, ...]
    tip: str
    """The tool point's name (a site)."""
    tip_pos: tuple[float, float, float]
    """Tool point in the last link's frame [m]."""
    tip_quat: tuple[float, float, float, float]
    """Tool frame in the last link's frame (w, x, y, z)."""

    @property
    def joints(self) -> tuple[str, ...]:
        """The hinges, base to tip: the order of `q` everywhere in this module."""
        return tuple(link.joint for link in self.links if link.joint is not None)

    def forward(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Tool position (3,) [m] and rotation (3, 3), hinge anchors (n, 3) and axes (n, 3), base frame, at `q` (n,)."""
        q = np.asarray(q, dtype=np.float64)
        rot, pos = np.eye(3), np.zeros(3)
        anchors, axes = [], []
        index = 0
        for link in self.links:
            pos = pos + rot @ np.asarray(link.pos)
            rot = rot @ quat_to_matrix(link.quat)
            if link.joint is None:
                continue
            anchor = pos + rot @ np.asarray(link.anchor)
            axis = rot @ np.asarray(link.axis)
            turn = axis_angle_matrix(axis, float(q[index]))
            pos = anchor + turn @ (pos - anchor)
            rot = turn @ rot
            anchors.append(anchor)
            axes.append(axis)
            index += 1
        tip = pos + rot @ np.asarray(self.tip_pos)
        return tip, rot @ quat_to_matrix(self.tip_quat), np.array(anchors), np.array(axes)

    def jacobian(self, q: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(tool position (3,), tool rotation (3, 3), Jacobian (6, n): linear rows then angular), base frame."""
        tip, rot, anchors, axes = self.forward(q)
        return tip, rot, np.concatenate([np.cross(axes, tip - anchors).T, axes.T])

    def dls_step(self, q: np.ndarray, target_pos: np.ndarray, damping: float,
                 target_rot: np.ndarray | None = None, rot_weight: float = 1.0) -> np.ndarray:
        """The damped least-squares joint step (n,) [rad] toward `target_pos` (3,) [m, base frame], and toward
        `target_rot` (3, 3) weighted by `rot_weight` [m/rad] when given: `Jᵀ (J Jᵀ + damping² I)⁻¹ e`."""
        tip, rot, jac = self.jacobian(q)
        error = np.asarray(target_pos, dtype=np.float64) - tip
        if target_rot is not None:
            error = np.concatenate([error, rot_weight * rotation_error(rot, np.asarray(target_rot, dtype=np.float64))])
            jac = np.concatenate([jac[:3], rot_weight * jac[3:]])
        else:
            jac = jac[:3]
        gram = jac @ jac.T + damping ** 2 * np.eye(len(error))
        return jac.T @ np.linalg.solve(gram, error)

    def dls_solve(self, q: np.ndarray, target_pos: np.ndarray, damping: float, target_rot: np.ndarray | None,
                  rot_weight: float, iterations: int, low: np.ndarray, high: np.ndarray) -> np.ndarray:
        """Joint positions (n,) [rad] after `iterations` half `dls_step`s from q, each kept inside [low, high]."""
        q = np.asarray(q, dtype=np.float64)
        for _ in range(iterations):
            q = np.clip(q + 0.5 * self.dls_step(q, target_pos, damping, target_rot, rot_weight), low, high)
        return q

    def to_json(self) -> dict[str, Any]:
        """The chain as a JSON object (the manifest's `ik.chain`)."""
        return {"base": self.base, "tip": self.tip, "tip_pos": list(self.tip_pos), "tip_quat": list(self.tip_quat),
                "links": [{"pos": list(k.pos), "quat": list(k.quat), "joint": k.joint, "axis": list(k.axis),
                           "anchor": list(k.anchor)} for k in self.links]}

    @classmethod
    def from_json(cls, data: Any, label: str) -> KinematicChain:
        """The chain of the JSON object at `label`; a clear `ManifestError` for anything malformed."""
        if not isinstance(data, dict):
            raise ManifestError(f"field '{label}' should be an object (a kinematic chain), got {type(data).__name__}")
        links = data.get("links")
        if not isinstance(links, list) or not links:
            raise ManifestError(f"field '{label}.links' should be a non-empty list of chain links")
        parsed = []
        for i, link in enumerate(links):
            where = f"{label}.links[{i}]"
            if not isinstance(link, dict):
                raise ManifestError(f"field '{where}' should be an object")
            joint = link.get("joint")
            if joint is not None and not isinstance(joint, str):
                raise ManifestError(f"field '{where}.joint' should be a joint name or null, got {joint!r}")
            axis = _vector(link.get("axis", [0.0, 0.0, 1.0]), 3, f"{where}.axis")
            if abs(np.linalg.norm(axis) - 1.0) > 1e-6:
                raise ManifestError(f"field '{where}.axis' {list(axis)} is not a unit vector")
            parsed.append(ChainLink(pos=_vector(link.get("pos"), 3, f"{where}.pos"),
                                    quat=_unit_quat(link.get("quat"), f"{where}.quat"), joint=joint, axis=axis,
                                    anchor=_vector(link.get("anchor", [0.0, 0.0, 0.0]), 3, f"{where}.anchor")))
        for key in ("base", "tip"):
            if not isinstance(data.get(key), str):
                raise ManifestError(f"field '{label}.{key}' should be a name, got {data.get(key)!r}")
        return cls(base=data["base"], links=tuple(parsed), tip=data["tip"],
                   tip_pos=_vector(data.get("tip_pos"), 3, f"{label}.tip_pos"),
                   tip_quat=_unit_quat(data.get("tip_quat"), f"{label}.tip_quat"))


def quat_to_matrix(quat) -> np.ndarray:
    """Rotation matrix (3, 3) of a unit quaternion (w, x, y, z)."""
    w, x, y, z = (float(v) for v in quat)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def axis_angle_matrix(axis: np.ndarray, angle: float) -> np.ndarray:
    """Rotation matrix (3, 3) by `angle` [rad] about the unit `axis` (Rodrigues)."""
    x, y, z = axis
    skew = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + math.sin(angle) * skew + (1.0 - math.cos(angle)) * skew @ skew


def rotation_vector_matrix(vector: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) of a rotation vector (3,) [rad] (axis times angle)."""
    angle = float(np.linalg.norm(vector))
    return axis_angle_matrix(np.asarray(vector, dtype=np.float64) / max(angle, 1e-9), angle)


def quat_mul(a, b) -> np.ndarray:
    """Hamilton product a ⊗ b (4,) of quaternions (w, x, y, z)."""
    aw, ax, ay, az = (float(v) for v in a)
    bw, bx, by, bz = (float(v) for v in b)
    return np.array([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw])


def quat_from_rotation_vector(vector) -> np.ndarray:
    """Unit quaternion (4,) (w, x, y, z) of a rotation vector (3,) [rad] (axis times angle)."""
    vector = np.asarray(vector, dtype=np.float64)
    angle = float(np.linalg.norm(vector))
    factor = math.sin(0.5 * angle) / angle if angle > 1e-6 else 0.5 - angle * angle / 48.0
    return np.concatenate([[math.cos(0.5 * angle)], vector * factor])


def rotation_error(rot: np.ndarray, target: np.ndarray) -> np.ndarray:
    """The small rotation (3,) [rad, base frame] that turns `rot` toward `target` (both (3, 3)):
    half the sum of the cross products of their columns (exact in direction, sin-like in size)."""
    return 0.5 * np.cross(rot.T, target.T).sum(axis=0)


def _vector(value, size: int, label: str) -> tuple[float, ...]:
    if not isinstance(value, list) or len(value) != size or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value):
        raise ManifestError(f"field '{label}' should be {size} finite numbers, got {value!r}")
    return tuple(float(v) for v in value)


def _unit_quat(value, label: str) -> tuple[float, float, float, float]:
    quat = _vector(value, 4, label)
    if abs(math.sqrt(sum(v * v for v in quat)) - 1.0) > 1e-6:
        raise ManifestError(f"field '{label}' {list(quat)} is not a unit quaternion (w, x, y, z)")
    return quat
