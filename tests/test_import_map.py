# SPDX-License-Identifier: BSD-3-Clause
"""The house map in docs/ARCHITECTURE.md is what the imports say, and the imports go one way."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import import_map  # noqa: E402

ENGINE = {"batonlab.sim", "batonlab.env", "batonlab.robots", "batonlab.terrain", "batonlab.rl", "batonlab.export",
          "batonlab.deploy", "batonlab.logs", "batonlab.learned", "batonlab.utils", "batonlab.rewards",
          "batonlab.curricula"}
"""Packages that never import a task (only the CLI and the tasks themselves do)."""

ROBOT_SIDE_MAY_IMPORT = {"batonlab", "batonlab.deploy", "batonlab.utils"}
"""What the robot's own packages (batonlab.deploy, deploy_ros) may import from the project."""


def _graph():
    return import_map.edges(import_map.modules())


def test_the_map_in_the_architecture_is_current():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "import_map.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_the_map_names_every_module():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    found = import_map.modules()
    assert len(found) > 100
    for module in found:
        leaf = module[len(import_map.house(module)) + 1:] or "__init__"
        assert leaf in text, f"{module} is missing from the map"


def test_imports_between_packages_go_one_way():
    assert import_map.cycles(_graph()) == []


def test_the_engine_never_imports_a_task():
    graph = _graph()
    assert {name for name in ENGINE if "batonlab.tasks" in graph.get(name, set())} == set()


def test_the_robot_side_imports_only_the_robot_side():
    graph = _graph()
    for name in ("batonlab.deploy", "deploy_ros"):
        assert graph.get(name, set()) <= ROBOT_SIDE_MAY_IMPORT, (name, sorted(graph[name] - ROBOT_SIDE_MAY_IMPORT))
