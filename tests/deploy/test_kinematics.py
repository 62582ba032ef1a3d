# SPDX-License-Identifier: BSD-3-Clause
"""The arm's kinematic chain: the robot-side numpy chain equals MuJoCo (tool pose, `mj_jacSite`), the torch
twin equals the numpy chain to 1e-5, its DLS step converges, and a malformed chain is refused clearly."""

from __future__ import annotations

import json
import re

import mujoco
import numpy as np
import pytest
import torch

from batonlab.actions.ik import TorchChain
from batonlab.deploy.kinematics import KinematicChain
from batonlab.deploy.manifest_json import ManifestError
from batonlab.robots.arm6 import ARM_JOINTS, EE_SITE
from batonlab.robots.assets import compile_spec
from batonlab.robots.kinematics import chain_from_model
from batonlab.tasks.wl_loco_manip import make_loco_manip_scene_spec


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    """The wheel-legged robot with arm6: the chain sits on a floating base, as on the robot."""
    return compile_spec(make_loco_manip_scene_spec())


def _random_q(model, rng, count):
    ids = [model.joint(j).id for j in ARM_JOINTS]
    low, high = model.jnt_range[ids].T
    return rng.uniform(low, high, size=(count, len(ids)))


def _mujoco_pose_and_jacobian(model, data, q):
    """MuJoCo's tool pose and Jacobian in the arm base frame, the base posed arbitrarily in the world."""
    data.qpos[[model.jnt_qposadr[model.joint(j).id] for j in ARM_JOINTS]] = q
    mujoco.mj_forward(model, data)
    base = model.body("arm_base").id
    base_rot, base_pos = data.xmat[base].reshape(3, 3), data.xpos[base]
    site = model.site(EE_SITE).id
    jac_pos, jac_rot = np.zeros((3, model.nv)), np.zeros((3, model.nv))
    mujoco.mj_jacSite(model, data, jac_pos, jac_rot, site)
    dofs = [model.jnt_dofadr[model.joint(j).id] for j in ARM_JOINTS]
    jac = np.concatenate([base_rot.T @ jac_pos[:, dofs], base_rot.T @ jac_rot[:, dofs]])
    return (base_rot.T @ (data.site_xpos[site] - base_pos), base_rot.T @ data.site_xmat[site].reshape(3, 3), jac)


def test_numpy_chain_equals_mujoco_on_a_moving_base(model):
    chain = chain_from_model(model, "arm_base", EE_SITE, ARM_JOINTS)
    assert chain.joints == ARM_JOINTS
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    data.qpos[:3] = [0.3, -0.2, 0.5]
    data.qpos[3:7] = np.array([0.9, 0.1, -0.2, 0.3]) / np.linalg.norm([0.9, 0.1, -0.2, 0.3])
    for q in _random_q(model, rng, 20):
        pos, rot, jac = chain.jacobian(q)
        mj_pos, mj_rot, mj_jac = _mujoco_pose_and_jacobian(model, data, q)
        np.testing.assert_allclose(pos, mj_pos, atol=1e-9)
        np.testing.assert_allclose(rot, mj_rot, atol=1e-9)
        np.testing.assert_allclose(jac, mj_jac, atol=1e-9)


def test_torch_twin_equals_the_numpy_chain_to_1e_5(model):
    chain = chain_from_model(model, "arm_base", EE_SITE, ARM_JOINTS)
    q = _random_q(model, np.random.default_rng(1), 64)
    target = np.random.default_rng(2).uniform([-0.2, -0.5, -0.3], [0.6, 0.5, 0.5], size=(64, 3))
    pos, rot, jac = TorchChain(chain).jacobian(torch.as_tensor(q, dtype=torch.float32))
    twin = TorchChain(chain)
    q32, target32 = torch.as_tensor(q, dtype=torch.float32), torch.as_tensor(target, dtype=torch.float32)
    step = twin.dls_step(q32, target32, 0.05)
    target_rot = twin.jacobian(q32.flip(0))[1]  # other poses' tool orientations
    pose_step = twin.dls_step(q32, target32, 0.05, target_rot=target_rot, rot_weight=0.3)
    for i in range(64):
        np_pos, np_rot, np_jac = chain.jacobian(q[i])
        np.testing.assert_allclose(pos[i].numpy(), np_pos, atol=1e-5)
        np.testing.assert_allclose(rot[i].numpy(), np_rot, atol=1e-5)
        np.testing.assert_allclose(jac[i].numpy(), np_jac, atol=1e-5)
        np.testing.assert_allclose(step[i].numpy(), chain.dls_step(q[i], target[i], 0.05), atol=1e-5)
        np.testing.assert_allclose(pose_step[i].numpy(), chain.dls_step(q[i], target[i], 0.05, target_rot=target_rot[i].numpy(),
                                                                        rot_weight=0.3), atol=1e-5)


def test_repeated_dls_steps_reach_a_reachable_target(model):
    chain = chain_from_model(model, "arm_base", EE_SITE, ARM_JOINTS)
    rng = np.random.default_rng(3)
    start, goal = _random_q(model, rng, 2)
    target, _, _ = chain.jacobian(goal)
    q = start.copy()
    errors = []
    for _ in range(60):
        q = q + chain.dls_step(q, target, damping=0.05)
        errors.append(float(np.linalg.norm(chain.forward(q)[0] - target)))
    assert errors[-1] < 1e-3 and errors[-1] < errors[0] / 100, errors[::10]
    # With the tool's orientation as well: the rotation error falls too.
    target_rot = chain.forward(goal)[1]
    q = start.copy()
    for _ in range(100):
        q = q + chain.dls_step(q, target, 0.05, target_rot=target_rot, rot_weight=0.3)
    pos, rot, _, _ = chain.forward(q)
    assert np.linalg.norm(pos - target) < 5e-3 and np.arccos(np.clip((np.trace(rot.T @ target_rot) - 1) / 2, -1, 1)) < 0.02


def test_the_chain_round_trips_through_json_and_malformed_ones_are_refused(model):
    chain = chain_from_model(model, "arm_base", EE_SITE, ARM_JOINTS)
    data = json.loads(json.dumps(chain.to_json()))
    assert KinematicChain.from_json(data, "actions[0].ik.chain") == chain
    bad_links = [
        ({**data, "links": []}, "links' should be a non-empty list"),
        ({**data, "links": [{**data["links"][0], "axis": [0.0, 0.0, 2.0]}]}, "is not a unit vector"),
        ({**data, "links": [{**data["links"][0], "quat": [1.0, 0.0, 0.0]}]}, "should be 4 finite numbers"),
        ({**data, "links": [{**data["links"][0], "pos": [0.0, float("nan"), 0.0]}]}, "should be 3 finite numbers"),
        ({**data, "tip_quat": [0.0, 0.0, 0.0, 0.0]}, "is not a unit quaternion"),
        ({**data, "base": None}, "'actions[0].ik.chain.base' should be a name"),
        ("arm", "should be an object (a kinematic chain)"),
    ]
    for value, message in bad_links:
        with pytest.raises(ManifestError, match=re.escape(message)):
            KinematicChain.from_json(value, "actions[0].ik.chain")


def test_a_chain_that_does_not_match_the_joints_is_refused(model):
    with pytest.raises(ValueError, match="moves joints"):
        chain_from_model(model, "arm_base", EE_SITE, ARM_JOINTS[:5])
    with pytest.raises(ValueError, match="is not below body"):
        chain_from_model(model, "left_thigh", EE_SITE, ARM_JOINTS)
