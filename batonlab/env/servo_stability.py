# SPDX-License-Identifier: BSD-3-Clause
"""A servo the integrator cannot hold: refused when the scene is built, naming the joint.

MuJoCo's Euler and RK4 integrators treat actuator damping (a position servo's kv, a velocity servo's
gain) explicitly. Alone on a joint of effective inertia I, one physics step multiplies the joint's
velocity by (1 - kv·dt/I): beyond kv·dt/I = 2 the velocity grows every step, the joint rings at its
torque limit, and training still "works" on a robot that cannot exist. It happens to robots from
files whose small distal links carry no rotor inertia (a URDF has no armature): a 2 N·m·s/rad wrist
of 2e-4 kg·m² at 5 ms gives kv·dt/I = 50. The cures are rotor inertia (`armature` in the robot
description, which a real geared motor has) or MuJoCo's `implicitfast` integrator, which treats
actuator damping implicitly.

I is taken at the model's reference pose (`dof_invweight0`, armature included), where an arm held
straight has its least inertia about its own axis.
"""

from __future__ import annotations

import mujoco
import numpy as np

MAX_EXPLICIT_DAMPING = 2.0
"""kv·dt/I above which an explicitly integrated servo diverges."""

_EXPLICIT_INTEGRATORS = (int(mujoco.mjtIntegrator.mjINT_EULER), int(mujoco.mjtIntegrator.mjINT_RK4))


class ServoStabilityError(ValueError):
    """A servo whose damping the scene's integrator cannot integrate at its time step."""


def explicit_damping_ratios(model: mujoco.MjModel) -> dict[str, float]:
    """kv·dt/I per actuator that damps a joint (position and velocity servos), by actuator name."""
    ratios = {}
    for a in range(model.nu):
        if int(model.actuator_trntype[a]) != int(mujoco.mjtTrn.mjTRN_JOINT):
            continue
        if int(model.actuator_biastype[a]) != int(mujoco.mjtBias.mjBIAS_AFFINE):
            continue
        kv = -float(model.actuator_biasprm[a, 2]) * float(model.actuator_gear[a, 0]) ** 2
        if kv <= 0.0:
            continue
        dof = int(model.jnt_dofadr[model.actuator_trnid[a, 0]])
        ratios[model.actuator(a).name] = kv * model.opt.timestep * float(model.dof_invweight0[dof])
    return ratios


def check_servo_stability(model: mujoco.MjModel) -> None:
    """Raise `ServoStabilityError` naming every servo that an explicit integrator would drive unstable."""
    if int(model.opt.integrator) not in _EXPLICIT_INTEGRATORS:
        return
    unstable = {name: ratio for name, ratio in explicit_damping_ratios(model).items() if ratio > MAX_EXPLICIT_DAMPING}
    if not unstable:
        return
    details = []
    for name, ratio in sorted(unstable.items(), key=lambda item: -item[1]):
        actuator = model.actuator(name)
        dof = int(model.jnt_dofadr[actuator.trnid[0]])
        inertia = 1.0 / float(model.dof_invweight0[dof])
        # Armature that brings kv·dt/I down to 1, half the bound.
        needed = ratio * inertia - inertia
        details.append(f"{model.joint(int(actuator.trnid[0])).name} (kv·dt/I = {ratio:.1f}, I = {inertia:.2g} kg·m²: "
                       f"armature >= {np.ceil(needed * 1e4) / 1e4:.4g} kg·m²)")
    raise ServoStabilityError(
        f"servos unstable at dt = {model.opt.timestep * 1000:g} ms with the explicit integrator: {'; '.join(details)}. "
        f"Damping above kv·dt/I = {MAX_EXPLICIT_DAMPING:g} diverges: give these joints rotor inertia (`armature` in the "
        f"robot description) or use the implicitfast integrator")
