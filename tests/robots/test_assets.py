# SPDX-License-Identifier: BSD-3-Clause
"""Robot constants: what the arm6 file promises (joints, limits, gains, sensors, collisions)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from batonlab.robots.arm6 import ARM_JOINTS, EE_SITE, home_pose, make_arm6_spec
from batonlab.robots.assets import compile_spec


@pytest.fixture(scope="module")
def arm():
    return compile_spec(make_arm6_spec())


def test_joints_actuators_and_gains(arm):
    joints = [arm.joint(j).name for j in range(arm.njnt)]
    assert joints == [*ARM_JOINTS, "finger_left", "finger_right"]
    expected = {"shoulder_yaw": (120, 6, 60), "shoulder_pitch": (160, 8, 60), "elbow_pitch": (100, 5, 40),
                "forearm_roll": (20, 1, 12), "wrist_pitch": (25, 1.2, 12), "wrist_roll": (10, 0.5, 8)}
    for name, (kp, kd, torque) in expected.items():
        act = arm.actuator(name)
        assert act.gainprm[0] == kp and -act.biasprm[2] == kd
        assert tuple(act.forcerange) == (-torque, torque)
        assert arm.joint(arm.actuator_trnid[act.id, 0]).name == name
        joint = arm.joint(name)
        np.testing.assert_allclose(act.ctrlrange, joint.range)  # targets can reach the whole range, no more


def test_mass_and_reach(arm):
    assert arm.body_subtreemass[arm.body("arm_base").id] == pytest.approx(8.35)
    data = mujoco.MjData(arm)
    mujoco.mj_forward(arm, data)  # qpos = 0: arm straight up
    shoulder = data.xanchor[arm.joint("shoulder_pitch").id]
    reach = np.linalg.norm(data.site(EE_SITE).xpos - shoulder)
    assert 0.6 < reach < 0.7


def test_home_keyframe_and_sensors(arm):
    pose = home_pose()
    assert [pose[j] for j in ARM_JOINTS] == pytest.approx([0.0, 0.3, 1.2, 0.0, 1.0, 0.0])
    data = mujoco.MjData(arm)
    mujoco.mj_resetDataKeyframe(arm, data, arm.key("home").id)
    mujoco.mj_forward(arm, data)
    ee = data.sensor("ee_pos_b").data
    assert ee == pytest.approx([0.446, 0.0, 0.308], abs=0.01)
    for name in ("ee_pos_b", "ee_quat_b", "ee_pos_w", "finger_left_touch", "finger_right_touch"):
        assert arm.sensor(name) is not None


def test_links_never_collide_with_each_other(arm):
    for g in range(arm.ngeom):
        # Collision geoms have contype 2 and conaffinity 1: 2 & 1 == 0, so arm-arm pairs never collide.
        if arm.geom_contype[g] or arm.geom_conaffinity[g]:
            assert arm.geom_contype[g] == 2 and arm.geom_conaffinity[g] == 1
    data = mujoco.MjData(arm)
    mujoco.mj_resetDataKeyframe(arm, data, arm.key("home").id)
    mujoco.mj_forward(arm, data)
    assert data.ncon == 0
