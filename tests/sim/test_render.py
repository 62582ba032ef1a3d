# SPDX-License-Identifier: BSD-3-Clause
"""Offscreen rendering works whatever the import order and falls back from EGL to OSMesa with a message."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# A user's task module that imports mujoco before anything of batonlab, with MUJOCO_GL unset: mujoco
# then chooses GLFW (a display) for `mujoco.Renderer`; batonlab's renderer must not care.
SCRIPT = """
import mujoco
import numpy as np
from batonlab.sim.render import OffscreenRenderer, gl_backend

model = mujoco.MjModel.from_xml_string(
    '<mujoco><worldbody><light pos="0 0 2"/><geom type="sphere" size="0.3" rgba="1 0 0 1"/></worldbody></mujoco>')
data = mujoco.MjData(model)
mujoco.mj_forward(model, data)
renderer = OffscreenRenderer(model, 60, 80)
renderer.update_scene(data)
frame = renderer.render()
renderer.close()
red, green = frame[..., 0].mean(), frame[..., 1].mean()
print(gl_backend(), frame.shape, round(float(red), 1), round(float(green), 1))
assert frame.shape == (60, 80, 3) and red > 20 and red > 5 * green, "the red sphere is in the picture"
"""


def run(extra_env: dict) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MUJOCO_GL", "PYOPENGL_PLATFORM")}
    return subprocess.run([sys.executable, "-c", SCRIPT], env={**env, **extra_env}, capture_output=True, text=True, timeout=120)


def test_rendering_works_when_mujoco_is_imported_first():
    done = run({})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] in ("egl", "osmesa") and "(60, 80, 3)" in done.stdout


def test_egl_missing_falls_back_to_osmesa_with_a_message():
    # No EGL vendor library can be found: EGL fails the way it does on a machine without a GPU driver.
    done = run({"__EGL_VENDOR_LIBRARY_FILENAMES": "/nonexistent/egl_vendor.json"})
    if done.returncode != 0 and "libosmesa6" in done.stderr:
        pytest.fail(f"OSMesa is not installed (scripts/setup.sh installs libosmesa6): {done.stderr}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("osmesa")
    assert "EGL is unavailable" in done.stderr and "using OSMESA" in done.stderr
