# SPDX-License-Identifier: BSD-3-Clause
"""The 1-DoF (hinge or slide) joints of a MuJoCo model: the joints a robot's joint states name."""

from __future__ import annotations

import mujoco
import numpy as np

ONE_DOF_JOINT_KINDS = {int(mujoco.mjtJoint.mjJNT_HINGE): "hinge", int(mujoco.mjtJoint.mjJNT_SLIDE): "slide"}
"""MuJoCo joint type → "hinge" (position in rad) or "slide" (position in m)."""


def is_one_dof(model: mujoco.MjModel, joint_id: int) -> bool:
    """Whether joint `joint_id` is a hinge or a slide joint."""
    return int(model.jnt_type[joint_id]) in ONE_DOF_JOINT_KINDS


def one_dof_joint_ids(model: mujoco.MjModel) -> list[int]:
    """Ids of every 1-DoF joint, in model order."""
    return [j for j in range(model.njnt) if is_one_dof(model, j)]


def is_position_servo(model: mujoco.MjModel, actuator: int) -> bool:
    """An actuator that drives one joint toward a position target (its bias pulls on the joint position)."""
    joint_driven = int(model.actuator_trntype[actuator]) == int(mujoco.mjtTrn.mjTRN_JOINT)
    return joint_driven and model.actuator_biasprm[actuator, 1] != 0


def held_target_slots(model: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray]:
    """(indices into `MjData.history` of the delayed position servos' past targets, qpos addresses of their joints).

    A servo with a command delay (`nsample` > 0) applies the targets of the last `delay` seconds; after a reset
    those are its joint's position, so it holds still until the first command arrives through the delay.
    """
    data = mujoco.MjData(model)
    slots, qpos_addresses = [], []
    for a in range(model.nu):
        n = int(model.actuator_history[a, 0])
        if n == 0 or not is_position_servo(model, a):
            continue
        mujoco.mj_initCtrlHistory(model, data, a, None, np.zeros(n))
        zeros = data.history.copy()
        mujoco.mj_initCtrlHistory(model, data, a, None, np.ones(n))
        found = np.flatnonzero(data.history != zeros)
        slots += found.tolist()
        qpos_addresses += [int(model.jnt_qposadr[model.actuator_trnid[a, 0]])] * len(found)
    return np.asarray(slots, dtype=int), np.asarray(qpos_addresses, dtype=int)
