# SPDX-License-Identifier: BSD-3-Clause
"""Manifest loading and validation on the robot side: schema, required fields, sizes, ONNX hash, terms."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from batonlab.deploy import DeployRuntime, ManifestError, load_manifest, parse_manifest
from ros.exports import arm_reach_manifest, make_export


def test_loads_an_export_folder_or_its_manifest(tmp_path):
    out = make_export(tmp_path / "exported")
    for path in (out, out / "manifest.json"):
        m = load_manifest(path)
        assert m.task == "arm_reach"
        assert m.joint_names[0] == "shoulder_yaw" and len(m.joint_names) == 6
        assert m.control_dt == pytest.approx(0.02)
        assert [t.name for t in m.obs_terms] == ["joint_pos", "joint_vel", "ee_pos", "ee_target", "last_action"]
        assert m.commands == {"ee_target": {"type": "UniformPositionCommand", "dim": 3}}
        assert m.pos_limits.shape == (6, 2) and np.isfinite(m.pos_limits).all()
        assert m.kp[0] == 120.0 and m.kd[0] == 6.0 and m.torque_limits[0] == 60.0
        assert m.default_joint_pos["finger_left"] == pytest.approx(0.02)


def test_unsupported_schema_version_is_refused(tmp_path):
    manifest = arm_reach_manifest()
    manifest["schema_version"] = 2
    with pytest.raises(ManifestError, match=r"schema_version 2 is not supported; this runtime reads \[1\]"):
        load_manifest(make_export(tmp_path, manifest))


@pytest.mark.parametrize("section,key", [("joints", "kp"), ("policy", "obs_dim"), ("control", "dt"), ("joints", "names")])
def test_missing_required_field_is_named(tmp_path, section, key):
    manifest = arm_reach_manifest()
    del manifest[section][key]
    with pytest.raises(ManifestError, match=rf"required field '{section}.{key}' is missing"):
        parse_manifest(manifest)


def test_onnx_hash_mismatch_is_refused(tmp_path):
    out = make_export(tmp_path)
    make_export(tmp_path / "other", bias=np.ones(6))
    (out / "policy.onnx").write_bytes((tmp_path / "other" / "policy.onnx").read_bytes())
    with pytest.raises(ManifestError, match="sha256"):
        load_manifest(out)
    assert load_manifest(out, verify_hash=False).task == "arm_reach"


def test_missing_onnx_file_is_refused(tmp_path):
    out = make_export(tmp_path)
    (out / "policy.onnx").unlink()
    with pytest.raises(ManifestError, match="does not exist"):
        load_manifest(out)


def test_inconsistent_sizes_are_refused():
    manifest = arm_reach_manifest()
    manifest["policy"]["obs_dim"] += 1
    with pytest.raises(ManifestError, match="add up to 24 columns, policy.obs_dim is 25"):
        parse_manifest(manifest)
    manifest = arm_reach_manifest()
    manifest["joints"]["kd"] = manifest["joints"]["kd"][:-1]
    with pytest.raises(ManifestError, match="joints.kd has 5 values for 6 joints"):
        parse_manifest(manifest)


def test_unknown_action_type_is_refused():
    manifest = arm_reach_manifest()
    manifest["actions"][0]["type"] = "joint_impedance"
    with pytest.raises(ManifestError, match="joint_impedance' is not supported"):
        parse_manifest(manifest)


def test_unknown_observation_function_is_refused_by_name():
    manifest = arm_reach_manifest()
    manifest["observations"]["terms"][2]["func"] = "my_robot.terms:lidar_heights"
    with pytest.raises(ManifestError, match=r"'ee_pos' uses my_robot.terms:lidar_heights.*supported functions"):
        DeployRuntime(parse_manifest(manifest), policy=lambda obs: obs)


def test_bad_term_params_are_refused():
    manifest = arm_reach_manifest()
    manifest["observations"]["terms"][0]["params"] = {"joint_names": ["shoulder_yaw"]}
    with pytest.raises(ManifestError, match="'joint_pos'.*bad params"):
        DeployRuntime(parse_manifest(manifest), policy=lambda obs: obs)


def test_unlimited_joints_and_torques_are_null_in_json_and_inf_here():
    manifest = arm_reach_manifest()
    manifest["joints"]["pos_limits"][0] = [None, None]
    manifest["joints"]["torque_limits"][0] = None
    m = parse_manifest(json.loads(json.dumps(manifest)))
    assert m.pos_limits[0].tolist() == [-np.inf, np.inf] and m.torque_limits[0] == np.inf


def test_deploy_imports_neither_torch_nor_mujoco(tmp_path):
    out = make_export(tmp_path)
    code = (
        "import sys, numpy as np\n"
        "from batonlab.deploy import DeployRuntime, load_manifest\n"
        f"rt = DeployRuntime(load_manifest({str(out)!r}), ignored_joints=['finger_left', 'finger_right'])\n"
        "rt.policy(np.zeros(rt.manifest.obs_dim, dtype=np.float32))\n"
        "print(sorted(m for m in ('torch', 'mujoco', 'tensordict', 'rsl_rl') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_cli_deploy_checks_an_export(tmp_path, capsys):
    from batonlab.cli.main import main

    out = make_export(tmp_path)
    assert main(["deploy", str(out)]) == 0
    assert "24 observations -> 6 actions at 50 Hz" in capsys.readouterr().out
    (out / "policy.onnx").write_bytes(b"not a model")
    assert main(["deploy", str(out)]) == 2
    assert "sha256" in capsys.readouterr().err
