# SPDX-License-Identifier: BSD-3-Clause
"""Packaging: the base install is the light robot runtime; torch is pinned; every package is listed."""

from __future__ import annotations

import subprocess
import sys
import tomllib
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def _names(requirements: list[str]) -> set[str]:
    return {r.split("[")[0].split("=")[0].split(">")[0].split("<")[0].strip().lower() for r in requirements}


def test_base_install_has_no_training_stack():
    base = _names(PYPROJECT["project"]["dependencies"])
    assert not base & {"torch", "mujoco", "rsl-rl-lib", "hydra-core", "tensordict", "mujoco-warp"}
    assert {"numpy", "onnxruntime"} <= base


def test_torch_is_pinned_in_the_training_extra():
    assert "torch==2.13.0" in PYPROJECT["project"]["optional-dependencies"]["train"]


def test_every_python_package_is_installed():
    listed = set(PYPROJECT["tool"]["setuptools"]["packages"])
    mapping = PYPROJECT["tool"]["setuptools"]["package-dir"]
    found = set()
    for package, folder in mapping.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            found.add(".".join([package, *relative.parts]) if relative.parts else package)
    found = {p for p in found if "__pycache__" not in p}
    assert found <= listed, f"packages missing from pyproject.toml: {sorted(found - listed)}"


def test_the_deploy_install_pulls_no_torch_and_no_mujoco(tmp_path):
    """`pip install batonlab[deploy]` into a fresh venv: the robot runtime imports, torch and mujoco are absent."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path / "wheel"), str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = (tmp_path / "wheel").glob("batonlab-*.whl")
    venv.create(tmp_path / "venv", with_pip=True)
    python = str(tmp_path / "venv" / "bin" / "python")
    installed = subprocess.run([python, "-m", "pip", "install", "-q", f"{wheel}[deploy]"], capture_output=True,
                               text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr
    probe = ("import importlib.util, sys; import batonlab.deploy.runtime, batonlab.deploy.recording, "
             "batonlab.deploy.policy, batonlab.deploy.safety_params; "
             "print(sorted(m for m in ('torch', 'mujoco') if importlib.util.find_spec(m) or m in sys.modules))")
    result = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
