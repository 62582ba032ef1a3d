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
          "batonlab.curricula", "batonlab.observations", "batonlab.actions", "batonlab.commands", "batonlab.events",
          "batonlab.terminations", "batonlab.privileges"}
"""Packages that never import a task (only the CLI and the tasks themselves do)."""

TERM_LIBRARIES = {"batonlab.observations", "batonlab.actions", "batonlab.commands", "batonlab.events",
                  "batonlab.terminations", "batonlab.privileges", "batonlab.rewards", "batonlab.curricula"}
"""Folders of terms by kind: they build on the managers' base classes, never the other way."""

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


def test_the_managers_and_the_physics_never_import_a_term_library():
    graph = _graph()
    for name in ("batonlab.env", "batonlab.sim", "batonlab.rl"):
        assert graph.get(name, set()) & TERM_LIBRARIES == set(), name


def test_the_robot_side_imports_only_the_robot_side():
    graph = _graph()
    for name in ("batonlab.deploy", "deploy_ros"):
        assert graph.get(name, set()) <= ROBOT_SIDE_MAY_IMPORT, (name, sorted(graph[name] - ROBOT_SIDE_MAY_IMPORT))
