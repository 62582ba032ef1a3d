# SPDX-License-Identifier: BSD-3-Clause
"""`batonlab deploy`: an export is only called deployable once the robot-side runtime has run it, and a
sim-to-sim run whose nodes fail says why in one line and exits non-zero."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from batonlab.cli.common import CliError
from batonlab.deploy import parse_manifest
from cli_runs import deploy
from ros.exports import arm_reach_manifest, make_export


def test_a_working_export_passes_the_dry_run(tmp_path, capsys):
    code, out, err = deploy(make_export(tmp_path / "export"), capsys=capsys)
    assert code == 0, err
    assert "dry run" in out and "state run" in out


def test_an_onnx_with_the_wrong_widths_is_refused_though_its_hash_matches(tmp_path, capsys):
    manifest = parse_manifest(arm_reach_manifest())
    obs_dim, action_dim = manifest.obs_dim, manifest.action_dim
    export_dir = make_export(tmp_path / "export", manifest, weight=np.zeros((obs_dim + 3, action_dim)))
    code, out, err = deploy(export_dir, capsys=capsys)
    assert code != 0
    assert "cannot load this export" in err and f"(batch, {obs_dim})" in err, err
    assert "consistent" not in out


def test_a_file_that_is_not_onnx_is_refused(tmp_path, capsys):
    export_dir = make_export(tmp_path / "export")
    manifest = json.loads((export_dir / "manifest.json").read_text())
    (export_dir / "policy.onnx").write_bytes(np.random.default_rng(0).bytes(4096))
    from batonlab.export.manifest import sha256_file

    manifest["policy"]["sha256"] = sha256_file(export_dir / "policy.onnx")
    (export_dir / "manifest.json").write_text(json.dumps(manifest))
    code, _, err = deploy(export_dir, capsys=capsys)
    assert code != 0 and "cannot load this export" in err, err
    assert len(err.strip().splitlines()) == 1


def test_an_onnx_that_outputs_nan_is_refused(tmp_path, capsys):
    action_dim = parse_manifest(arm_reach_manifest()).action_dim
    export_dir = make_export(tmp_path / "export", bias=np.full(action_dim, np.nan))
    code, out, err = deploy(export_dir, capsys=capsys)
    assert code != 0
    assert "non-finite" in err and "not run" in err, err
    assert "consistent" not in out


# Sim-to-sim: the nodes' failures reach the user (needs rclpy).


def test_sim_with_a_task_the_sim_robot_cannot_find_fails_naming_it(tmp_path):
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from ros.nodes import new_domain_id

    export_dir = make_export(tmp_path / "export")
    result = subprocess.run(
        [sys.executable, "-m", "batonlab.cli.main", "deploy", "--sim", str(export_dir), "--task", "arm_rech",
         "--episodes", "1", "--domain-id", str(new_domain_id())],
        capture_output=True, text=True, timeout=300, env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")},
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stdout + result.stderr
    error = result.stderr.strip().splitlines()
    assert len(error) == 1 and error[0].startswith("batonlab deploy: sim_robot_node exited with code 2"), result.stderr
    assert "unknown task 'arm_rech'" in error[0]
    log = export_dir / "sim_to_sim" / "sim_robot_node.log"
    assert str(log) in error[0] and "refusing to start: unknown task 'arm_rech'" in log.read_text()


def test_a_policy_node_that_refuses_to_start_stops_the_run(tmp_path):
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from batonlab.cli.deploy import run_sim_to_sim
    from ros.nodes import new_domain_id

    export_dir = make_export(tmp_path / "export")
    with pytest.raises(CliError) as raised:
        run_sim_to_sim(export_dir, "arm_reach", num_episodes=1, domain_id=new_domain_id(), timeout_s=120,
                       policy_params={"manifest": str(tmp_path / "elsewhere")}, log_dir=tmp_path / "logs")
    message = str(raised.value)
    assert message.startswith("policy_node exited with code 2") and "manifest not found" in message, message
    assert "\n" not in message and str(tmp_path / "logs" / "policy_node.log") in message


def test_sim_robot_node_refuses_joints_the_task_does_not_command(tmp_path):
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from batonlab.cli.deploy import node_command, ros_environment
    from ros.nodes import new_domain_id

    params = {"task": "arm_reach", "command_joint_order": ["elbow", "tail"]}
    result = subprocess.run(node_command("sim_robot_node", params=params), env=ros_environment(new_domain_id()),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "[sim_robot_node] refusing to start: command_joint_order names joints ['elbow', 'tail']" in result.stderr


@pytest.mark.parametrize("mode", ["lockstep", "real-time"])
def test_sim_runs_in_lockstep_unless_told_real_time_and_reports_the_command_delay(tmp_path, mode):
    """`deploy --sim` (a policy that holds the default pose, one episode): lockstep by default, so no period
    starts before its command; `--real-time` reaches the sim robot, which then measures how late they came."""
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from ros.nodes import new_domain_id

    export_dir, results = make_export(tmp_path / "export"), tmp_path / "results.json"
    result = subprocess.run(
        [sys.executable, "-m", "batonlab.cli.main", "deploy", "--sim", str(export_dir), "--episodes", "1",
         "--results", str(results), "--domain-id", str(new_domain_id())] + (["--real-time"] if mode == "real-time" else []),
        capture_output=True, text=True, timeout=300, env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(results.read_text())
    (line,) = [line for line in result.stdout.splitlines() if "lockstep waits timed out" in line]
    print(f"\n[deploy --sim {mode}] {line}")
    assert isinstance(summary["command_delay_steps"], float)
    if mode == "lockstep":
        assert summary["lockstep"] and line.startswith("[batonlab] lockstep: 0 control periods began on the previous")
        assert summary["command_delay_steps"] == 0.0 and summary["lockstep_timeouts"] == 0
    else:
        assert not summary["lockstep"] and line.startswith("[batonlab] real time: ")


def test_the_ros_packages_are_found_in_the_checkout_or_named_as_missing(monkeypatch, tmp_path):
    """Without a sourced colcon install the deploy commands run the checkout's packages; without either, one line."""
    from batonlab.cli import ros_packages
    from batonlab.cli.common import CliError

    for name in ("deploy_ros", "sim2sim_ros"):
        package = ros_packages.find_package(name, {"AMENT_PREFIX_PATH": str(tmp_path)})
        assert package.python_path == package.share == ros_packages.CHECKOUT / name
        assert (package.python_path / name / "__init__.py").is_file()
    monkeypatch.setattr(ros_packages, "CHECKOUT", tmp_path)
    with pytest.raises(CliError, match="the ROS package deploy_ros is not found: build it with colcon"):
        ros_packages.find_package("deploy_ros", {})
