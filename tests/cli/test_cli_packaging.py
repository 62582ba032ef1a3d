# SPDX-License-Identifier: BSD-3-Clause
"""The command's options file is declared package data: building batonlab ships it without setuptools warnings."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_ships_the_options_file_without_package_warnings(tmp_path):
    # Build from a copy: an in-tree build leaves build/ behind.
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = listed.decode().split("\0")
    source = tmp_path / "src"
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    shutil.copy2(ROOT / "pyproject.toml", source / "pyproject.toml")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                            str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    assert "absent from the `packages` configuration" not in built.stdout + built.stderr
    (wheel,) = (tmp_path / "dist").glob("batonlab-*.whl")
    assert "batonlab/cli/conf/batonlab.yaml" in zipfile.ZipFile(wheel).namelist()
