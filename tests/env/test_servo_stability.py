# SPDX-License-Identifier: BSD-3-Clause
"""Servos an explicit integrator cannot hold are refused when the scene is built, naming the joint;
the bound is the one at which MuJoCo's own integration diverges."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import yaml

from batonlab.env.env import BatonEnv
from batonlab.env.servo_stability import ServoStabilityError, check_servo_stability, explicit_damping_ratios
from batonlab.robots import load
from batonlab.tasks import list_tasks, make_task_cfg
from robot_files import write_urdf_arm

INERTIA = 0.01
"""Moment of inertia of the test link about its hinge [kg·m²]."""
DT = 0.005


def _hinge(kv: float, integrator: str = "Euler") -> mujoco.MjModel:
    """One link on a hinge about z (no gravity, no joint damping) driven by a position servo of damping kv."""
    xml = f"""
    <mujoco>
      <option timestep="{DT}" gravity="0 0 0" integrator="{integrator}"/>
      <worldbody>
        <body name="link">
          <joint name="hinge" type="hinge" axis="0 0 1"/>
          <inertial pos="0 0 0" mass="1" diaginertia="{INERTIA} {INERTIA} {INERTIA}"/>
        </body>
      </worldbody>
      <actuator><position name="servo" joint="hinge" kp="0" kv="{kv}"/></actuator>
    </mujoco>"""
    return mujoco.MjModel.from_xml_string(xml)


def _speed_after(model: mujoco.MjModel, steps: int = 40) -> float:
    data = mujoco.MjData(model)
    data.qvel[0] = 1.0
    for _ in range(steps):
        mujoco.mj_step(model, data)
        if data.warning[mujoco.mjtWarning.mjWARN_BADQACC].number:
            return float("inf")  # MuJoCo found a diverged state and reset it
    return abs(float(data.qvel[0]))


@pytest.mark.parametrize("ratio", [0.5, 1.5, 2.5, 10.0])
def test_the_bound_is_where_euler_diverges(ratio):
    """kv·dt/I is what the check computes, and the joint's speed grows in MuJoCo exactly when it exceeds 2."""
    model = _hinge(kv=ratio * INERTIA / DT)
    assert explicit_damping_ratios(model)["servo"] == pytest.approx(ratio, rel=1e-6)
    diverges = _speed_after(model) > 1.0
    assert diverges == (ratio > 2.0)
    if diverges:
        with pytest.raises(ServoStabilityError, match=r"hinge \(kv·dt/I = [0-9.]+, I = 0.01 kg·m²: armature >="):
            check_servo_stability(model)
    else:
        check_servo_stability(model)


def test_the_suggested_armature_makes_the_servo_stable():
    model = _hinge(kv=10.0 * INERTIA / DT)
    with pytest.raises(ServoStabilityError) as error:
        check_servo_stability(model)
    armature = float(str(error.value).split("armature >= ")[1].split(" kg")[0])
    model.dof_armature[0] = armature
    mujoco.mj_setConst(model, mujoco.MjData(model))  # recompute dof_invweight0 with the armature
    check_servo_stability(model)
    assert _speed_after(model) < 1e-3


def test_implicit_integrators_are_not_refused():
    """implicitfast integrates actuator damping implicitly: the same servo is stable there."""
    model = _hinge(kv=10.0 * INERTIA / DT, integrator="implicitfast")
    check_servo_stability(model)
    assert _speed_after(model) < 1.0


def test_a_urdf_arm_without_rotor_inertia_is_refused_by_name(tmp_path):
    """The URDF test arm's description gives its elbow and wrists no armature: its wrist_roll servo
    (kv 2 on a 2e-4 kg·m² link at 5 ms) is refused when the reach scene is built, with the cure."""
    description = write_urdf_arm(tmp_path / "robot")
    cfg = make_task_cfg("reach", robot=str(description))
    cfg.num_envs = 2
    with pytest.raises(ServoStabilityError, match=r"wrist_roll \(kv·dt/I = [0-9.]+.*armature >=.*implicitfast"):
        BatonEnv(cfg)
    raw = yaml.safe_load(description.read_text())
    raw["actuators"][1]["armature"] = 0.02
    fixed = description.with_name("with_armature.yaml")
    fixed.write_text(yaml.safe_dump(raw))
    spec = load(fixed)
    spec.option.timestep = DT
    check_servo_stability(spec.compile())


def test_every_registered_task_passes():
    """The project's own robots keep their servos within the bound (arm6's shoulder yaw is the closest, ≈ 1.2)."""
    from batonlab.env.scene import Scene

    for task in list_tasks():
        cfg = make_task_cfg(task.name)
        model = Scene(cfg.scene, cfg.sim).model
        assert max(explicit_damping_ratios(model).values()) < 2.0, task.name
        assert np.isfinite(list(explicit_damping_ratios(model).values())).all()
