# SPDX-License-Identifier: BSD-3-Clause
"""Locating the MJCF files in the repository's `assets/` folder."""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from pathlib import Path

import mujoco

ASSETS_DIR = Path(os.environ.get("BATONLAB_ASSETS", Path(__file__).resolve().parents[2] / "assets"))
"""Root of the MJCF assets; override with the BATONLAB_ASSETS environment variable."""


def asset_path(*parts: str) -> Path:
    """Absolute path of an asset file, with a clear error if it is missing."""
    path = ASSETS_DIR.joinpath(*parts)
    if not path.is_file():
        raise FileNotFoundError(f"batonlab asset not found: {path} (set BATONLAB_ASSETS to the assets folder)")
    return path


def load_spec(*parts: str) -> mujoco.MjSpec:
    """Load an MJCF asset as an editable MjSpec."""
    return mujoco.MjSpec.from_file(str(asset_path(*parts)))


def attach(parent: mujoco.MjSpec, child: mujoco.MjSpec, frame: mujoco.MjsFrame, prefix: str = "") -> None:
    """Attach `child`'s world body into `parent` at `frame`.

    An empty prefix keeps joint, actuator and sensor names as written in the asset, so that
    the names in policies and manifests are the robot's own names. MuJoCo warns that such a
    model may not save to XML; batonlab never saves composed scenes, it rebuilds them.
    """
    previous = mujoco.get_mju_user_warning()
    mujoco.set_mju_user_warning(lambda message: None)
    try:
        parent.attach(child, frame=frame, prefix=prefix)
    finally:
        mujoco.set_mju_user_warning(previous)


QUIET_COMPILER_WARNINGS = (
    "Attaching a spec with an empty prefix",
    "obj_decoder: invalid or missing face texture coordinate",
)
"""Starts of MuJoCo compiler warnings that do not apply to batonlab: empty-prefix attachment (composed
scenes are rebuilt, never saved) and OBJ texture coordinates MuJoCo drops (robot meshes carry no texture)."""


def compile_spec(spec: mujoco.MjSpec) -> mujoco.MjModel:
    """Compile a spec (a composed scene or a robot file) without the warnings of `QUIET_COMPILER_WARNINGS`."""
    with quiet_compiler():
        return spec.compile()


@contextlib.contextmanager
def quiet_compiler():
    """Within it, the compiler warnings of `QUIET_COMPILER_WARNINGS` are not shown (libraries that compile specs)."""
    with warnings.catch_warnings():
        for message in QUIET_COMPILER_WARNINGS:
            warnings.filterwarnings("ignore", message=re.escape(message))
        yield
