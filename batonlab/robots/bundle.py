# SPDX-License-Identifier: BSD-3-Clause
"""A robot description and every file it loads, hashed and copied as one: the `robot/` folder of a run
and of an export, so that they play, resume and deploy wherever they are moved.

The files keep their layout relative to the one folder that holds them all (the description's folder,
usually), so the description's relative paths (`model`, `package_roots`) and the model file's relative
mesh paths hold in the copy as they did in the original.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from batonlab.deploy.manifest import sha256_file
from batonlab.robots.description import load_description
from batonlab.robots.model_file import model_files

ROBOT_FOLDER = "robot"
"""The folder of a run (and of an export) that holds the copy of its robot's files."""


@dataclass(frozen=True)
class RobotBundle:
    """A description YAML and the files it loads, by their names relative to the folder that holds them all."""

    root: Path
    """The innermost folder holding the description, its model file, meshes and package roots."""
    description: str
    """The description's name under `root` (POSIX)."""
    files: dict[str, Path]
    """Absolute path of each file by its name under `root`, the description first."""
    folders: tuple[str, ...]
    """Package roots under `root`: made in a copy even when no file lies in them (the description checks them)."""

    def hashes(self) -> dict[str, str]:
        """SHA-256 of each file by its name (what a run and an export record)."""
        return {name: sha256_file(path) for name, path in self.files.items()}

    def copy_to(self, folder: Path) -> Path:
        """Copy the files into `folder` in their layout; returns the copy of the description."""
        for name in self.folders:
            (folder / name).mkdir(parents=True, exist_ok=True)
        for name, path in self.files.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, folder / name)
        return folder / self.description


def robot_bundle(description: str | Path) -> RobotBundle:
    """The files of the robot description YAML `description`: itself, its model file and what that loads.

    Raises:
        RobotDescriptionError / FileNotFoundError: the description does not load.
    """
    path = Path(description).resolve()
    desc = load_description(path)
    paths = [path, *model_files(desc.model, desc.package_roots)]
    roots = [Path(root) for root in desc.package_roots.values()]
    root = Path(os.path.commonpath([p.parent for p in paths] + roots))
    files = {p.relative_to(root).as_posix(): p for p in dict.fromkeys(paths)}
    return RobotBundle(root, path.relative_to(root).as_posix(), files,
                       tuple(r.relative_to(root).as_posix() for r in roots))


def changed_files(recorded: dict[str, str], hashes: dict[str, str]) -> list[str]:
    """Names of the files whose hashes differ between two records, or that only one of them has."""
    return sorted(name for name in recorded.keys() | hashes.keys() if recorded.get(name) != hashes.get(name))

