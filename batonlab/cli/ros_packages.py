# SPDX-License-Identifier: BSD-3-Clause
"""Where the ROS packages of `batonlab deploy` are: a colcon install on AMENT_PREFIX_PATH, else the checkout."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import batonlab
from batonlab.cli.common import CliError

NODE_PACKAGES = {"policy_node": "deploy_ros", "sim_robot_node": "sim2sim_ros"}
"""The ROS package of each node."""

CHECKOUT = Path(batonlab.__file__).resolve().parents[1]
"""The folder batonlab is imported from the source of (an editable install): its ROS packages sit beside it."""


@dataclass(frozen=True)
class RosPackage:
    """One ament_python package: the folder to put on PYTHONPATH and the folder holding its config/ and launch/."""

    name: str
    python_path: Path
    share: Path

    def config(self, filename: str) -> Path:
        """A file of the package's config/ folder."""
        return self.share / "config" / filename


def find_package(name: str, environ: dict[str, str] | None = None) -> RosPackage:
    """`name` from the first AMENT_PREFIX_PATH prefix that installed it (a sourced colcon install), else from the
    source checkout batonlab runs from.

    Raises:
        CliError: neither has it (a wheel install of batonlab without a built workspace).
    """
    env = os.environ if environ is None else environ
    for prefix in filter(None, env.get("AMENT_PREFIX_PATH", "").split(os.pathsep)):
        share = Path(prefix) / "share" / name
        sites = [s for s in sorted((Path(prefix) / "lib").glob("python3*/site-packages")) if (s / name).is_dir()]
        if (share / "package.xml").is_file() and sites:
            return RosPackage(name, sites[0], share)
    source = CHECKOUT / name
    if (source / "package.xml").is_file():
        return RosPackage(name, source, source)
    raise CliError(f"the ROS package {name} is not found: build it with colcon and source its install "
                   f"(AMENT_PREFIX_PATH), or run batonlab from its checkout (pip install -e .)")
