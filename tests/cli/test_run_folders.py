# SPDX-License-Identifier: BSD-3-Clause
"""A run folder keeps a copy of its robot's files: trained over the URDF arm of `tests/robot_files.py`,
moved elsewhere once the original files are gone, it plays, exports and resumes; a resumed run checks a
given robot= by content; `batonlab deploy RUN` reuses the run's export until its sources change."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from batonlab.cli.main import main
from batonlab.deploy.manifest import sha256_file
from batonlab.rl import checkpoint
from robot_files import write_urdf_arm

TINY = ["env.num_envs=8", "agent.num_steps_per_env=8", "eval_episodes=1", "eval_interval=1000", "progress=false"]
"""A run of seconds (its closing evaluation one episode; robot= trains to reach's bar, never checked here): what
these tests need is its folder, not a policy."""


def _reach_robot(folder: Path) -> Path:
    """The URDF arm's description with rotor inertia on the wrist (as tests/tasks/test_reach_any_robot.py
    writes it: stable servos at reach's physics step)."""
    raw = yaml.safe_load(write_urdf_arm(folder).read_text())
    raw["actuators"][1]["armature"] = 0.02
    path = folder / "test_arm_reach.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


@pytest.fixture(scope="module")
def moved_run(tmp_path_factory) -> Path:
    """A one-iteration reach run over the URDF arm, moved to another folder after its robot files were deleted."""
    root = tmp_path_factory.mktemp("runs")
    robot = _reach_robot(root / "robot_files")
    assert main(["train", "task=reach", f"robot={robot}", "max_iterations=1", f"log_root={root / 'logs'}", *TINY]) == 0
    (run_dir,) = (root / "logs" / "reach").iterdir()
    shutil.rmtree(root / "robot_files")
    return Path(shutil.move(run_dir, root / "elsewhere" / "my_run"))


@pytest.fixture
def run(moved_run, tmp_path) -> Path:
    """This test's own copy of the moved run."""
    return Path(shutil.copytree(moved_run, tmp_path / "run"))


def test_a_moved_run_plays_exports_and_resumes_without_its_original_robot_files(run, capsys):
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["cli"]["robot"] == "robot/test_arm_reach.yaml"
    assert sorted(config["robot_sha256"]) == ["test_arm_description/meshes/link_box.stl",
                                              "test_arm_description/meshes/link_cylinder.stl",
                                              "test_arm_description/urdf/test_arm.urdf", "test_arm_reach.yaml"]
    assert "robot_files" not in (run / "config.yaml").read_text()  # no path of the original files
    assert main(["play", f"run_dir={run}", "play.num_episodes=1", "play.video_episodes=0", "progress=false"]) == 0
    assert main(["export", f"run_dir={run}"]) == 0
    manifest = json.loads((run / "exported" / "manifest.json").read_text())
    assert manifest["training_config"]["cli"]["robot"] == "robot/test_arm_reach.yaml"  # relative to the export
    assert manifest["training_config"]["robot_sha256"] == config["robot_sha256"]
    assert (run / "exported" / "robot" / "test_arm_description" / "urdf" / "test_arm.urdf").is_file()
    assert "robot_files" not in json.dumps(manifest)
    assert main(["train", "resume=true", f"run_dir={run}", "max_iterations=2", *TINY]) == 0
    out = capsys.readouterr().out
    assert f"resuming {run} from model_1.pt (iteration 1)" in out
    assert checkpoint.load(run / "model_2.pt")["iter"] == 2
    assert yaml.safe_load((run / "config.yaml").read_text())["robot_sha256"] == config["robot_sha256"]


def test_a_resumed_run_takes_a_robot_of_the_same_files_and_refuses_another(run, tmp_path, capsys, monkeypatch):
    """robot= on resume is compared by content with the run's copy: the same files elsewhere pass, an edited
    description is refused, naming the file, before anything is simulated."""
    from batonlab.cli import common

    same = _reach_robot(tmp_path / "same_files_elsewhere")
    inv = common.build_invocation(["resume=true", f"run_dir={run}", f"robot={same}"])
    common.check_run_robot(inv.top, run)
    edited = _reach_robot(tmp_path / "edited")
    edited.write_text(edited.read_text().replace("stiffness: 120.0", "stiffness: 150.0"))
    monkeypatch.setattr("batonlab.cli.train.BatonEnv", None)  # refused before any env is built
    assert main(["train", "resume=true", f"run_dir={run}", f"robot={edited}", "max_iterations=2", *TINY]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"batonlab train: robot={edited} is not the robot {run} was trained on: files "
                   f"['test_arm_reach.yaml'] differ from the run's copy in {run / 'robot'}; pass no robot= "
                   "(the run's copy) or run_dir=... of a run of this robot")


def test_deploy_reuses_the_runs_export_until_its_checkpoint_changes(run, capsys):
    """`batonlab deploy RUN` (the export step of `deploy --sim RUN`) exports once, then reuses the export while
    its checkpoint, robot files and config.yaml are unchanged; a changed checkpoint is re-exported, though
    a `deploy --sim` left its `sim_to_sim/` output in the export folder."""
    manifest = run / "exported" / "manifest.json"
    assert main(["deploy", str(run)]) == 0
    assert "[batonlab] exported" in capsys.readouterr().out
    first = (manifest.stat().st_mtime_ns, manifest.read_bytes())
    assert main(["deploy", str(run)]) == 0
    out = capsys.readouterr().out
    assert (f"[batonlab] reusing {run / 'exported'}: its checkpoint, robot files and the run's config.yaml are "
            "those it was exported from") in out
    assert "[batonlab] exported" not in out
    assert (manifest.stat().st_mtime_ns, manifest.read_bytes()) == first
    (run / "exported" / "sim_to_sim").mkdir()
    (run / "exported" / "sim_to_sim" / "sim_robot_node.log").write_text("a deploy --sim's log\n")
    saved = checkpoint.load(run / "model_1.pt")
    weights = saved["actor_state_dict"]
    name = next(k for k, v in weights.items() if v.is_floating_point())
    weights[name] = weights[name] + 0.1
    checkpoint.save_atomic(saved, run / "model_1.pt")
    assert main(["deploy", str(run)]) == 0
    out = capsys.readouterr().out
    old, new = json.loads(first[1])["training_config"]["checkpoint_sha256"], sha256_file(run / "model_1.pt")
    assert (f"[batonlab] re-exporting {run / 'exported'}: the checkpoint model_1.pt (sha256 {new[:12]}) is not the "
            f"one exported (model_1.pt, sha256 {old[:12]})\n") in out
    assert "[batonlab] exported" in out
    assert json.loads(manifest.read_bytes())["training_config"]["checkpoint_sha256"] == new
    assert not (run / "exported" / "sim_to_sim").exists()  # the new export's folder: that log was the old one's


def test_deploy_sim_twice_reuses_the_export_the_second_time(run, capsys):
    """Over ROS 2 (one episode each): the second `deploy --sim RUN` runs the first one's export, its own
    `sim_to_sim/` output beside it, and the sim robot builds the URDF arm from the export's copy."""
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from ros.nodes import new_domain_id

    manifest = run / "exported" / "manifest.json"
    for call in range(2):
        assert main(["deploy", "--sim", str(run), "--episodes", "1", "--domain-id", str(new_domain_id())]) == 0
        out = capsys.readouterr().out
        assert "[batonlab] sim-to-sim over ROS 2: success rate" in out
        if call == 0:
            assert "[batonlab] exported" in out
            first = (manifest.stat().st_mtime_ns, manifest.read_bytes())
    assert f"[batonlab] reusing {run / 'exported'}: its checkpoint" in out and "[batonlab] exported" not in out
    assert (manifest.stat().st_mtime_ns, manifest.read_bytes()) == first
    assert (run / "exported" / "sim_to_sim" / "sim_robot_node.log").is_file()
