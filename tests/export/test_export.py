# SPDX-License-Identifier: BSD-3-Clause
"""Export parity: ONNX equals the torch actor; the manifest round-trips and its hash matches."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from tensordict import TensorDict

from batonlab.deploy import load_manifest
from batonlab.deploy.manifest import SCHEMA_VERSION, sha256_file
from batonlab.export.onnx import export
from batonlab.rl.runner import BatonRunner
from batonlab.rl.vecenv import RslRlVecEnv
from batonlab.tasks import make_agent_cfg
from conftest import make_reach_env


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(0)
    env = make_reach_env(num_envs=4, play=True)
    runner = BatonRunner(RslRlVecEnv(env), make_agent_cfg("arm_reach"))
    policy = runner.inference_policy()
    # Non-trivial normaliser statistics, so the test fails if they are left out of the ONNX graph.
    normalizer = policy.obs_normalizer
    normalizer._mean.uniform_(-1.0, 1.0)
    normalizer._var.uniform_(0.5, 2.0)
    normalizer._std.copy_(normalizer._var.sqrt())
    out = tmp_path_factory.mktemp("export")
    onnx_path, manifest_path = export(env, policy, out, "arm_reach", training_config={"seed": 0})
    yield env, policy, onnx_path, manifest_path
    env.close()


@pytest.mark.parametrize("batch", [1, 64])
def test_onnx_matches_torch(exported, batch):
    env, policy, onnx_path, _ = exported
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    generator = torch.Generator().manual_seed(batch)
    worst = 0.0
    for _ in range(-(-1000 // batch)):  # at least 1000 observations
        obs = 2.0 * torch.randn(batch, 24, generator=generator)
        with torch.no_grad():
            expected = policy(TensorDict({"policy": obs}, batch_size=[batch])).numpy()
        (actual,) = session.run(["actions"], {"obs": obs.numpy()})
        worst = max(worst, float(np.abs(actual - expected).max()))
    assert worst < 1e-5


def test_onnx_has_dynamic_batch_and_metadata(exported):
    _, _, onnx_path, _ = exported
    model = onnx.load(str(onnx_path))
    batch_dim = model.graph.input[0].type.tensor_type.shape.dim[0]
    assert batch_dim.dim_param and not batch_dim.dim_value
    meta = {p.key: p.value for p in model.metadata_props}
    assert json.loads(meta["batonlab.joint_names"])[0] == "shoulder_yaw"
    assert float(meta["batonlab.control_dt"]) == pytest.approx(0.02)


def test_onnx_metadata_equals_the_manifest(exported):
    _, _, onnx_path, manifest_path = exported
    manifest = load_manifest(manifest_path)
    meta = {p.key: json.loads(p.value) for p in onnx.load(str(onnx_path)).metadata_props}
    assert meta == {key: json.loads(value) for key, value in manifest.onnx_metadata().items()}
    assert meta["batonlab.task"] == manifest.task and meta["batonlab.schema_version"] == SCHEMA_VERSION
    assert meta["batonlab.joint_names"] == list(manifest.joint_names)
    assert meta["batonlab.default_joint_pos"] == manifest.default_pos.tolist()
    assert meta["batonlab.action_scale"] == manifest.action_scale.tolist()
    assert meta["batonlab.kp"] == manifest.kp.tolist() and meta["batonlab.kd"] == manifest.kd.tolist()
    assert meta["batonlab.control_dt"] == manifest.control_dt
    assert meta["batonlab.observation_terms"] == [t.name for t in manifest.obs_terms]
    assert meta["batonlab.observation_scale"] == [t.scale for t in manifest.obs_terms]
    assert meta["batonlab.observation_history_length"] == [t.history_length for t in manifest.obs_terms]


def test_manifest_round_trips_and_hash_matches(exported):
    env, _, onnx_path, manifest_path = exported
    manifest = json.loads(manifest_path.read_text())
    assert json.loads(json.dumps(manifest)) == manifest
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["policy"]["sha256"] == sha256_file(onnx_path)
    parsed = load_manifest(manifest_path)
    assert parsed.to_json() == manifest
    assert parsed.obs_dim == 24 and parsed.action_dim == 6
    joints = manifest["joints"]
    assert joints["names"] == list(env.action_manager.terms["arm"].joint_names)
    # Values come from the compiled model that drove the simulator.
    model = env.scene.model
    act = env.action_manager.terms["arm"].actuator_ids.numpy()
    assert joints["kp"] == pytest.approx(model.actuator_gainprm[act, 0].tolist())
    assert joints["kd"] == pytest.approx((-model.actuator_biasprm[act, 2]).tolist())
    assert joints["torque_limits"] == pytest.approx(model.actuator_forcerange[act, 1].tolist())
    np.testing.assert_allclose(parsed.ctrl_range, model.actuator_ctrlrange[act], rtol=1e-6)
    assert [manifest["default_joint_pos"][j] for j in joints["names"]] == pytest.approx([0.0, 0.3, 1.2, 0.0, 1.0, 0.0])
    assert manifest["actions"][0]["use_default_offset"] is True
    np.testing.assert_array_equal(parsed.action_offset, env.action_manager.terms["arm"].offset.numpy())
    assert manifest["control"] == {"physics_dt": 0.005, "decimation": 4} and parsed.control_rate_hz == pytest.approx(50.0)
    terms = manifest["observations"]["terms"]
    assert [t["name"] for t in terms] == ["joint_pos", "joint_vel", "ee_pos", "ee_target", "last_action"]
    assert sum(t["size"] * max(1, t["history_length"]) for t in terms) == 24
    assert terms[1]["scale"] == pytest.approx(0.1)
    assert terms[0]["func"] == "batonlab.observations.proprioception:joint_pos_rel"
    assert manifest["actions"][0]["type"] == "joint_position"
    # A modified ONNX file no longer matches the recorded hash.
    tampered = onnx_path.read_bytes() + b"\0"
    onnx_path.with_suffix(".tampered").write_bytes(tampered)
    assert sha256_file(onnx_path.with_suffix(".tampered")) != manifest["policy"]["sha256"]
