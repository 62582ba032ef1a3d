# SPDX-License-Identifier: BSD-3-Clause
"""Manifest loading and validation on the robot side: schema (v2, and v1 files as batonlab 0.1 wrote them),
JSON round trip, required fields, sizes, ONNX hash, terms."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from batonlab.deploy import DeployRuntime, ManifestError, load_manifest, parse_manifest
from batonlab.deploy.actions import ActionProcessor
from batonlab.deploy.manifest import Manifest, sha256_file
from ros.exports import arm_reach_manifest, make_export

V1_FILE = Path(__file__).resolve().parents[1] / "data" / "manifest_v1_arm_reach.json"
"""arm_reach's manifest as `batonlab export` wrote it with schema version 1 (batonlab 0.1.0)."""


def v1_manifest() -> dict:
    return json.loads(V1_FILE.read_text())


def test_loads_an_export_folder_or_its_manifest(tmp_path):
    out = make_export(tmp_path / "exported")
    for path in (out, out / "manifest.json"):
        m = load_manifest(path)
        assert m.task == "arm_reach"
        assert m.joint_names[0] == "shoulder_yaw" and len(m.joint_names) == 6
        assert m.control_dt == pytest.approx(0.02)
        assert [t.name for t in m.obs_terms] == ["joint_pos", "joint_vel", "ee_pos", "ee_target", "last_action"]
        assert m.commands["ee_target"].dim == 3 and m.commands["ee_target"].type == "UniformPositionCommand"
        assert m.pos_limits.shape == (6, 2) and np.isfinite(m.pos_limits).all()
        assert m.kp[0] == 120.0 and m.kd[0] == 6.0 and m.torque_limits[0] == 60.0
        assert m.default_joint_pos["finger_left"] == pytest.approx(0.02)


def test_unsupported_schema_version_is_refused(tmp_path):
    out = make_export(tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    manifest["schema_version"] = 3
    (out / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ManifestError, match=r"manifest.json: schema_version 3 is not supported; this runtime reads \[1, 2\]"):
        load_manifest(out)


@pytest.mark.parametrize("section,key", [("joints", "kp"), ("joints", "names"), ("joints", "ctrl_range"),
                                         ("control", "physics_dt"), ("control", "decimation"), ("policy", "input_name")])
def test_missing_required_field_is_named(section, key):
    manifest = arm_reach_manifest()
    del manifest[section][key]
    with pytest.raises(ManifestError, match=rf"required field '{section}.{key}' is missing"):
        parse_manifest(manifest)


@pytest.mark.parametrize("section,key", [("joints", "kp"), ("joints", "default_pos"), ("policy", "obs_dim"), ("control", "dt"),
                                         ("joints", "names")])
def test_missing_required_field_of_a_v1_file_is_named(section, key):
    manifest = v1_manifest()
    del manifest[section][key]
    with pytest.raises(ManifestError, match=rf"required field '{section}.{key}' is missing"):
        parse_manifest(manifest)


def test_json_round_trip():
    manifest = parse_manifest(arm_reach_manifest())
    assert Manifest.from_json(manifest.to_json()) == manifest
    # Unlimited bounds, clips, history, a hash: everything a manifest can hold survives JSON text.
    varied = dataclasses.replace(
        manifest.with_sha256("ab" * 32),
        joints=dataclasses.replace(manifest.joints, pos_limits=((-np.inf, np.inf),) + manifest.joints.pos_limits[1:],
                                   torque_limits=(np.inf,) + manifest.joints.torque_limits[1:]),
        obs_terms=(dataclasses.replace(manifest.obs_terms[0], clip=(-1.0, 1.0), history_length=3, noise_std=0.01),
                   *manifest.obs_terms[1:]),
    )
    text = json.dumps(varied.to_json(), allow_nan=False)
    assert Manifest.from_json(json.loads(text)) == varied
    assert varied.obs_dim == manifest.obs_dim + 12


def test_robot_sections_round_trip_and_bad_ones_are_named():
    """The wheel-legged manifest: IMU sensors with frames, held arm joints, the crouch stop, command fields."""
    from batonlab.env.env import BatonEnv
    from batonlab.export.manifest import manifest_from_env
    from batonlab.tasks import make_task_cfg

    cfg = make_task_cfg("wl_velocity", play=True)
    cfg.num_envs = 1
    env = BatonEnv(cfg)
    manifest = manifest_from_env(env, "wl_velocity")
    env.close()
    data = json.loads(json.dumps(manifest.to_json(), allow_nan=False))
    assert Manifest.from_json(data) == manifest
    assert {n: (s.source, s.frame, s.body) for n, s in manifest.sensors.items()} == {
        "imu_gyro": ("imu.angular_velocity", "imu", "base"), "imu_quat": ("imu.orientation", "imu", "base")}
    assert "REP-145" in data["sensors"]["imu_quat"]["convention"]
    assert manifest.held_joints.names[:2] == ("shoulder_yaw", "shoulder_pitch") and manifest.held_joints.targets[1] == pytest.approx(-1.2)
    assert manifest.stop.behavior == "crouch" and manifest.stop.pose["left_knee_pitch"] == 2.2
    assert manifest.commands["base_velocity"].fields == ("lin_vel_x", "ang_vel_z", "height")
    assert manifest.commands["base_velocity"].default == pytest.approx((0.0, 0.0, 0.463))
    for path, value, message in [
        (("sensors", "imu_quat", "source"), "magnetometer", "sensor source 'magnetometer'"),
        (("held_joints", "kp"), [1.0], "held_joints.kp has 1 values for 7 joints"),
        (("stop", "pose"), {"tail": 0.1}, "stop.pose names joints ['tail']"),
        (("commands", "base_velocity", "default"), [0.0], "default of 1 values for dim 3"),
        (("held_joints",), ["shoulder_yaw"], "field 'held_joints' should be an object"),
    ]:
        bad = json.loads(json.dumps(data))
        node = bad
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        with pytest.raises(ManifestError, match=re.escape(message)):
            parse_manifest(bad)


def test_a_v1_file_loads_as_the_manifest_of_the_same_env(tmp_path):
    current = parse_manifest(arm_reach_manifest())
    old = parse_manifest(v1_manifest())
    # Version 1 has no control range (unlimited), training noise (0), command fields nor sensor frames.
    # Everything else is the same contract.
    assert np.isinf(old.ctrl_range).all() and all(t.noise_std == 0.0 for t in old.obs_terms)
    assert old.sensors == {} and old.commands["ee_target"].fields == ()
    assert dataclasses.replace(old, joints=dataclasses.replace(old.joints, ctrl_range=current.joints.ctrl_range),
                               commands=current.commands, sensors=current.sensors,
                               obs_terms=tuple(dataclasses.replace(t, noise_std=c.noise_std)
                                               for t, c in zip(old.obs_terms, current.obs_terms))) == current
    assert old.control_dt == 0.02 and old.default_pos.tolist() == pytest.approx([0.0, 0.3, 1.2, 0.0, 1.0, 0.0])
    np.testing.assert_array_equal(ActionProcessor(old).offset, ActionProcessor(current).offset)
    # A v1 export folder (the manifest naming its ONNX file's hash) runs in the runtime.
    out = make_export(tmp_path)
    data = v1_manifest()
    data["policy"]["sha256"] = sha256_file(out / "policy.onnx")
    (out / "manifest.json").write_text(json.dumps(data, indent=2))
    runtime = DeployRuntime(load_manifest(out), ignored_joints=["finger_left", "finger_right"])
    assert runtime.control.policy(np.zeros(24, dtype=np.float32)).shape == (6,)


def test_v1_copies_that_disagree_are_refused():
    manifest = v1_manifest()
    manifest["actions"][0]["offset"][1] += 0.1
    with pytest.raises(ManifestError, match=r"actions\[0\].offset .* is neither the default pose of its joints nor zero"):
        parse_manifest(manifest)
    manifest = v1_manifest()
    manifest["control"]["dt"] = 0.01
    with pytest.raises(ManifestError, match=r"control.dt 0.01 is not control.physics_dt × control.decimation"):
        parse_manifest(manifest)


def test_the_test_exports_are_written_by_the_export_writer(tmp_path):
    out = make_export(tmp_path)
    manifest = load_manifest(out)
    model = onnx.load(str(out / "policy.onnx"))
    assert {p.key: p.value for p in model.metadata_props} == manifest.onnx_metadata()
    assert json.loads((out / "manifest.json").read_text()) == manifest.to_json()


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
    manifest = v1_manifest()
    manifest["policy"]["obs_dim"] += 1
    with pytest.raises(ManifestError, match="add up to 24 columns, policy.obs_dim is 25"):
        parse_manifest(manifest)
    for manifest in (arm_reach_manifest(), v1_manifest()):
        manifest["joints"]["kd"] = manifest["joints"]["kd"][:-1]
        with pytest.raises(ManifestError, match="joints.kd has 5 values for 6 joints"):
            parse_manifest(manifest)
    manifest = arm_reach_manifest()
    manifest["actions"][0]["joints"] = manifest["actions"][0]["joints"][::-1]
    with pytest.raises(ManifestError, match=r"the action terms' joints \['wrist_roll'.* are not joints.names"):
        parse_manifest(manifest)
    manifest = arm_reach_manifest()
    del manifest["default_joint_pos"]["elbow_pitch"]
    with pytest.raises(ManifestError, match=r"default_joint_pos has no value for the action joints \['elbow_pitch'\]"):
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


def test_every_robot_side_term_names_a_training_function_and_old_names_still_load():
    """The manifest names observation functions by `module:qualname`: each name the robot side computes
    is where training's function lives now, and each name older exports wrote maps to one of them."""
    import importlib

    from batonlab.deploy.manifest_sections import RENAMED_OBS_FUNCS
    from batonlab.deploy.observation import OBS_FUNCS
    from batonlab.env.terms import qualified_name

    for name in OBS_FUNCS:
        module, qualname = name.split(":")
        assert qualified_name(getattr(importlib.import_module(module), qualname)) == name
    assert set(RENAMED_OBS_FUNCS.values()) <= set(OBS_FUNCS)
    assert [t.func for t in parse_manifest(v1_manifest()).obs_terms] == [t.func for t in parse_manifest(arm_reach_manifest()).obs_terms]


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
        "rt.control.policy(np.zeros(rt.manifest.obs_dim, dtype=np.float32))\n"
        "print(sorted(m for m in ('torch', 'mujoco', 'tensordict', 'rsl_rl') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_robot_node_imports_neither_torch_nor_mujoco():
    """policy_node and every module it pulls in (inputs, outputs, recording) run on a robot computer without
    the training stack; rclpy is the only addition to `batonlab.deploy`'s needs."""
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    deploy_ros = Path(__file__).resolve().parents[2] / "deploy_ros"
    code = ("import sys\nimport deploy_ros.policy_node\n"
            "print(sorted(m for m in ('torch', 'mujoco', 'tensordict', 'rsl_rl') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(deploy_ros)})
    assert out.stdout.strip() == "[]"


def test_cli_deploy_checks_an_export(tmp_path, capsys):
    from batonlab.cli.main import main

    out = make_export(tmp_path)
    assert main(["deploy", str(out)]) == 0
    assert "24 observations -> 6 actions at 50 Hz" in capsys.readouterr().out
    (out / "policy.onnx").write_bytes(b"not a model")
    assert main(["deploy", str(out)]) == 2
    assert "sha256" in capsys.readouterr().err
