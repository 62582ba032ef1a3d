# SPDX-License-Identifier: BSD-3-Clause
"""Tasks from outside the repository: the README's example package (`tests/plugin_example`) found
through its `batonlab.tasks` entry point, factories given as `task=<module>:<function>`, and a
plugin that fails to import. The package is installed with `pip install --target` into a temporary
folder put on PYTHONPATH, so the project's virtualenv is left as it was.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from batonlab.tasks import get_task, make_agent_cfg, make_task_cfg

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = Path(__file__).resolve().parents[1] / "plugin_example"
SPEC = "two_link_tasks.reach:make_two_link_reach_cfg"
TINY = ["env.num_envs=8", "agent.num_steps_per_env=8", "max_iterations=2", "progress=false"]
BROKEN_MODULE = "import not_a_module_of_this_test  # the plugin's dependency is missing\n"
BROKEN_DIST_INFO = {
    "METADATA": "Metadata-Version: 2.1\nName: broken-tasks\nVersion: 0.1\n",
    "entry_points.txt": "[batonlab.tasks]\nbroken_reach = broken_tasks:make_broken_reach_cfg\n",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder holding the installed example package and an installed plugin that fails to import."""
    site = tmp_path_factory.mktemp("site")
    source = tmp_path_factory.mktemp("src") / "two-link-tasks"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
                    "--target", str(site), str(source)], check=True, capture_output=True, timeout=300)
    (site / "broken_tasks.py").write_text(BROKEN_MODULE)
    dist_info = site / "broken_tasks-0.1.dist-info"
    dist_info.mkdir()
    for name, text in BROKEN_DIST_INFO.items():
        (dist_info / name).write_text(text)
    return site


def batonlab(*args: str, cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "egl")}
    return subprocess.run([sys.executable, "-m", "batonlab.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_readme_shows_the_example_package():
    """Every file block of the README's "Write your own task" section is the tested file, verbatim."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Write your own task", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\w*\n(.*?)```", section, flags=re.S)
    shown = {}
    for block in blocks:
        first, _, body = block.partition("\n")
        if first.startswith("# two-link-tasks/"):
            shown[first.removeprefix("# two-link-tasks/")] = body
    files = {str(p.relative_to(EXAMPLE)): p.read_text() for p in EXAMPLE.rglob("*") if p.is_file() and p.stat().st_size
             and "__pycache__" not in p.parts}
    assert shown == files and (EXAMPLE / "two_link_tasks" / "__init__.py").read_text() == ""
    assert sum(block.count("\n") for block in blocks) < 80


def test_list_names_origins_and_the_plugin_that_fails(site, tmp_path):
    listed = batonlab("list", cwd=tmp_path, pythonpath=site)
    assert listed.returncode == 0, listed.stderr
    lines = {line.split()[0]: line for line in listed.stdout.splitlines() if line and not line.startswith("(")}
    assert "built-in" in lines["arm_reach"]
    assert "entry point of two-link-tasks 0.1.0" in lines["two_link_reach"]
    assert "Planar two-link arm brings its fingertip to a commanded point." in lines["two_link_reach"]
    assert "entry point of broken-tasks 0.1" in lines["broken_reach"]
    assert "FAILED TO LOAD: ModuleNotFoundError: No module named 'not_a_module_of_this_test'" in lines["broken_reach"]

    failed = batonlab("train", "task=broken_reach", cwd=tmp_path, pythonpath=site)
    assert failed.returncode == 2
    assert "task 'broken_reach' (entry point of broken-tasks 0.1) failed to load: ModuleNotFoundError" in failed.stderr


def test_plugin_task_trains_plays_replays_and_exports(site, tmp_path):
    """The README's commands on the installed plugin; `replay` is another process that finds it by name."""
    trained = batonlab("train", "task=two_link_reach", *TINY, cwd=tmp_path, pythonpath=site)
    assert trained.returncode == 0, trained.stderr
    (run_dir,) = (tmp_path / "logs" / "two_link_reach").iterdir()
    assert (run_dir / "model_2.pt").is_file()
    assert "two_link_tasks.reach:joint_vel_at_target_l2" in (run_dir / "config.yaml").read_text()

    played = batonlab("play", "task=two_link_reach", "play.num_episodes=4", "play.video_episodes=1", "play.video_height=96",
                      "play.video_width=128", "progress=false", "record=bags", "play.record_episodes=1",
                      cwd=tmp_path, pythonpath=site)
    assert played.returncode == 0, played.stderr
    assert json.loads((run_dir / "play" / "metrics.json").read_text())["num_episodes"] == 4
    assert (run_dir / "play" / "rollout.mp4").is_file()
    (bag,) = (tmp_path / "bags").iterdir()
    replayed = batonlab("replay", str(bag), cwd=tmp_path, pythonpath=site)
    assert replayed.returncode == 0, replayed.stderr

    exported = batonlab("export", "task=two_link_reach", cwd=tmp_path, pythonpath=site)
    assert exported.returncode == 0, exported.stderr
    manifest = json.loads((run_dir / "exported" / "manifest.json").read_text())
    assert manifest["task"] == "two_link_reach" and manifest["joints"]["names"] == ["shoulder", "elbow"]


def test_import_path_task_trains_without_an_install(tmp_path):
    """`task=<module>:<factory>` with the module on PYTHONPATH; the agent config is the sibling factory."""
    trained = batonlab("train", f"task={SPEC}", *TINY, cwd=tmp_path, pythonpath=EXAMPLE)
    assert trained.returncode == 0, trained.stderr
    (run_dir,) = (tmp_path / "logs" / "two_link_reach").iterdir()
    assert f"task_name: {SPEC}" in (run_dir / "config.yaml").read_text()


def test_sim_robot_node_finds_the_plugin_by_name(site):
    """The node `deploy --sim` starts is another process: it builds the plugin's robot from its name
    (asked for a joint the task lacks, it refuses, naming the plugin's joints)."""
    pytest.importorskip("rclpy", reason="needs rclpy: pip install batonlab[ros]")
    from batonlab.cli.deploy import node_command, ros_environment
    from ros.nodes import new_domain_id

    params = {"task": "two_link_reach", "command_joint_order": ["elbow", "wrist"]}
    env = ros_environment(new_domain_id(), base={**os.environ, "PYTHONPATH": str(site)})
    result = subprocess.run(node_command("sim_robot_node", params=params), env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2, result.stderr
    assert "names joints ['wrist'] that the task does not command ['shoulder', 'elbow']" in result.stderr


def test_import_path_contract(tmp_path, monkeypatch):
    """Fresh configs per call, the sibling agent config or the default, and the sim robot of `deploy --sim`."""
    monkeypatch.syspath_prepend(str(EXAMPLE))
    first, second = make_task_cfg(SPEC), make_task_cfg(SPEC)
    first.rewards["near"].weight = 5.0
    assert first is not second and second.rewards["near"].weight == 1.0
    assert make_task_cfg(SPEC, play=True).observations["policy"].enable_corruption is False
    assert make_agent_cfg(SPEC).max_iterations == 100
    assert get_task(SPEC).origin == "module two_link_tasks.reach"

    (tmp_path / "solo_task.py").write_text(f"from {SPEC.replace(':', ' import ')} as make_cfg\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    agent = make_agent_cfg("solo_task:make_cfg")
    assert agent.experiment_name == "solo_task" and agent.max_iterations == 300

    with pytest.raises(KeyError, match=r"unknown task 'two_link_rech'; valid tasks: \['arm_door', 'arm_lift', 'arm_push_grasp', 'arm_push_grasp_tool', 'arm_reach'"):
        get_task("two_link_rech")
    with pytest.raises(KeyError, match="cannot load 'make_cfg' from module 'no_such_pkg.tasks'.*No module named"):
        get_task("no_such_pkg.tasks:make_cfg")

    monkeypatch.syspath_prepend(str(ROOT / "deploy_ros"))
    from batonlab.sim2sim.robot import SimRobot

    threads = torch.get_num_threads()
    try:
        robot = SimRobot(SPEC, seed=0)  # sets torch to one thread, as the node wants
        assert robot.command_joints == ["shoulder", "elbow"] and robot.sensor_names == ["tip_pos"]
        robot.env.close()
    finally:
        torch.set_num_threads(threads)
