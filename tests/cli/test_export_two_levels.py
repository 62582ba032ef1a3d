# SPDX-License-Identifier: BSD-3-Clause
"""A hierarchy's run through the user's commands: `batonlab train` (an upper level cloned from the expert over a
whole-body policy's export), `batonlab export` (both levels, the whole-body export in `lower/`) and `batonlab deploy`
(both levels load joined and dry-run)."""

from __future__ import annotations

import json

from batonlab.deploy import load_manifest
from batonlab.deploy.manifest import sha256_file
from cli_runs import deploy
from cli_training import export_run, train_run
from whole_body import untrained_export


def test_a_hierarchy_run_exports_both_levels_and_deploys(tmp_path, capsys):
    lower = untrained_export(tmp_path / "whole_body")
    run = train_run("wl_baton", tmp_path / "logs", f"env.actions.commands.params.export={lower}", "env.num_envs=4",
                    "agent.max_iterations=1", "agent.num_steps_per_env=8", "agent.algorithm.class_name=Distillation",
                    "teacher=expert", "agent.algorithm.distillation.teacher_action_prob=1.0")
    out = export_run(run.run_dir, tmp_path / "exported")
    assert sha256_file(out / "lower" / "policy.onnx") == sha256_file(f"{lower}/policy.onnx")
    layer = json.loads((out / "manifest.json").read_text())["actions"][0]
    assert layer["type"] == "whole_body_commands" and layer["command_layer"]["lower"] == "lower"
    manifest = load_manifest(out)
    assert [m.task for m in manifest.levels] == ["wl_baton", "wl_loco_manip_pose"]
    capsys.readouterr()
    code, stdout, stderr = deploy(out, capsys=capsys)
    assert code == 0, stderr
    assert "dry run" in stdout and "state run" in stdout
