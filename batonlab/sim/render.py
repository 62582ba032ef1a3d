# SPDX-License-Identifier: BSD-3-Clause
"""Offscreen rendering without a display: EGL (GPU or Mesa), else OSMesa (software), whatever the import order.

`mujoco.Renderer` takes its GL platform from `MUJOCO_GL` as it was when mujoco was first imported,
so a user module that imports mujoco before batonlab leaves `mujoco.Renderer` on GLFW, which needs a
display. `OffscreenRenderer` instead creates its GL context itself, from `mujoco.egl` or
`mujoco.osmesa`, and renders with MuJoCo's classic `mjr_*` calls. Which of the two works is decided
once per process, before PyOpenGL is imported (its platform cannot change afterwards), by trying to
create a tiny context in a child process. The Debian packages this needs (libegl1, libgl1,
libegl-mesa0, libosmesa6) are installed by `scripts/setup.sh`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
import os
import subprocess
import sys

import mujoco
import numpy as np

BACKENDS = ("egl", "osmesa")
_APT = {"egl": "libegl1 libgl1 libegl-mesa0", "osmesa": "libosmesa6"}
_chosen: str | None = None


def gl_backend() -> str:
    """"egl" or "osmesa": the first one that can create a context on this machine (decided once).

    `MUJOCO_GL=osmesa` asks for OSMesa only. If PyOpenGL was already imported for one of the two,
    that one is used (PyOpenGL cannot switch platforms within a process).
    """
    global _chosen
    if _chosen is not None:
        return _chosen
    platform = os.environ.get("PYOPENGL_PLATFORM", "").lower()
    if "OpenGL" in sys.modules:
        if platform not in BACKENDS:
            raise RuntimeError(f"PyOpenGL was imported for the {platform or 'default (GLX)'} platform before batonlab "
                               "could choose a headless one; set MUJOCO_GL=egl (or osmesa) before starting Python")
        _chosen = platform
        return _chosen
    wanted = os.environ.get("MUJOCO_GL", "").lower()
    candidates = ["osmesa"] if wanted == "osmesa" else list(BACKENDS)
    failures = {}
    for backend in candidates:
        failure = _probe(backend)
        if failure is None:
            if backend != candidates[0]:
                print(f"[batonlab] offscreen rendering: {candidates[0].upper()} is unavailable ({failures[candidates[0]]}); "
                      f"using {backend.upper()} (software, slower)", file=sys.stderr)
            _chosen = backend
            os.environ["PYOPENGL_PLATFORM"] = backend
            os.environ["MUJOCO_GL"] = backend  # child processes start on the same platform
            return backend
        failures[backend] = failure
    tried = "; ".join(f"{b.upper()}: {why}" for b, why in failures.items())
    packages = " ".join(_APT[b] for b in candidates)
    raise RuntimeError(f"offscreen rendering is unavailable ({tried}). Install the GL libraries: "
                       f"sudo apt-get install {packages} (scripts/setup.sh does this)")


class OffscreenRenderer:
    """Renders RGB frames of a model (the subset of `mujoco.Renderer` that batonlab uses).

    Args:
        model: The model; its offscreen buffer is enlarged to fit the image if needed.
        height, width: Image size [px].
    """

    def __init__(self, model: mujoco.MjModel, height: int, width: int):
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
        model.vis.global_.offheight = max(model.vis.global_.offheight, height)
        backend = gl_backend()
        self.model, self.height, self.width = model, height, width
        self._gl = importlib.import_module(f"mujoco.{backend}").GLContext(width, height)
        self._gl.make_current()
        self._context = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150.value)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, self._context)
        self._scene = mujoco.MjvScene(model, maxgeom=10000)
        self._option = mujoco.MjvOption()
        self._camera = mujoco.MjvCamera()
        self._rect = mujoco.MjrRect(0, 0, width, height)
        self._pixels = np.empty((height, width, 3), dtype=np.uint8)

    def set_effects(self, on: bool) -> None:
        """Shadows, reflections and skybox on (pictures for people) or off (frames for learned rewards).

        On a software GL (Mesa llvmpipe) the shadow pass dominates the frame time; timings in
        docs/modules/batonlab.sim.render.md.
        """
        for flag in (mujoco.mjtRndFlag.mjRND_SHADOW, mujoco.mjtRndFlag.mjRND_REFLECTION, mujoco.mjtRndFlag.mjRND_SKYBOX):
            self._scene.flags[flag] = int(on)

    def set_geom_groups(self, groups: tuple[int, ...] | None) -> None:
        """Draw only geoms and sites of these groups (0-5); None: MuJoCo's default, groups 0, 1 and 2.

        Why: a learned reward's camera can show just the bodies its task is about (`arm_reach`'s
        `tool_view` draws only the target), so that frames differ by what progress changes and not
        by the pose of everything else in view. Sites follow the same groups: the tool-centre
        point's marker drawn over the target would tell the pose of the tool, not its distance.
        """
        shown = (0, 1, 2) if groups is None else tuple(groups)
        if any(not 0 <= g < len(self._option.geomgroup) for g in shown):
            raise ValueError(f"geom groups must be in 0..{len(self._option.geomgroup) - 1}, got {shown}")
        for g in range(len(self._option.geomgroup)):
            self._option.geomgroup[g] = int(g in shown)
            self._option.sitegroup[g] = int(g in shown)

    def update_scene(self, data: mujoco.MjData, camera: str | int = -1) -> None:
        """Camera by name or id; -1: the model's default free camera."""
        camera_id = self.model.camera(camera).id if isinstance(camera, str) else int(camera)
        if camera_id < 0:
            mujoco.mjv_defaultFreeCamera(self.model, self._camera)
        else:
            self._camera.type = mujoco.mjtCamera.mjCAMERA_FIXED
            self._camera.fixedcamid = camera_id
        mujoco.mjv_updateScene(self.model, data, self._option, None, self._camera,
                               mujoco.mjtCatBit.mjCAT_ALL.value, self._scene)

    def render(self) -> np.ndarray:
        """(height, width, 3) uint8, top row first."""
        self._gl.make_current()
        mujoco.mjr_render(self._rect, self._scene, self._context)
        mujoco.mjr_readPixels(self._pixels, None, self._rect, self._context)
        return np.flipud(self._pixels).copy()

    def close(self) -> None:
        """Free the MuJoCo render context and its GL context."""
        if self._gl is not None:
            self._gl.make_current()
            self._context.free()
            self._gl.free()
            self._gl = None


def make_renderer(model: mujoco.MjModel, height: int, width: int) -> OffscreenRenderer:
    """An offscreen renderer of `height` x `width` pixels for `model`."""
    return OffscreenRenderer(model, height, width)


class FrameRenderer:
    """One offscreen renderer and a scratch MjData for a model, remade when the frame size changes."""

    def __init__(self, model: mujoco.MjModel):
        self.model = model
        self.data = mujoco.MjData(model)
        self._renderer: OffscreenRenderer | None = None

    def frames(self, count: int, pose: Callable[[int, mujoco.MjData], None], camera: str | int = -1,
               size: tuple[int, int] = (240, 320), effects: bool = True,
               geom_groups: tuple[int, ...] | None = None) -> np.ndarray:
        """(count, H, W, 3) uint8 frames; `pose(k, data)` writes the k-th world's state into `data` first."""
        height, width = size
        if self._renderer is None or (self._renderer.height, self._renderer.width) != (height, width):
            self.close()
            self._renderer = make_renderer(self.model, height, width)
        self._renderer.set_effects(effects)
        self._renderer.set_geom_groups(geom_groups)
        frames = np.empty((count, height, width, 3), dtype=np.uint8)
        for k in range(count):
            pose(k, self.data)
            mujoco.mj_forward(self.model, self.data)
            self._renderer.update_scene(self.data, camera=camera)
            frames[k] = self._renderer.render()
        return frames

    def close(self) -> None:
        """Release the GL context."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None


def write_mp4(path: str, frames, fps: float) -> None:
    """Write RGB frames (T, H, W, 3) uint8 to an MP4 with OpenCV."""
    import cv2

    frames = list(frames)
    if not frames:
        raise ValueError("write_mp4: no frames")
    height, width = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), float(fps), (width, height))
    if not writer.isOpened():
        raise RuntimeError(f"OpenCV could not open a video writer for {path}")
    try:
        for frame in frames:
            writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    finally:
        writer.release()


# Private helpers.

_PROBE = """
import os, sys
os.environ["PYOPENGL_PLATFORM"] = sys.argv[1]
import importlib
context = importlib.import_module("mujoco." + sys.argv[1]).GLContext(8, 8)
context.make_current()
context.free()
"""


def _probe(backend: str) -> str | None:
    """None if a child process can create a `backend` context, else the last line of its error."""
    env = {**os.environ, "PYOPENGL_PLATFORM": backend, "MUJOCO_GL": backend}
    try:
        done = subprocess.run([sys.executable, "-c", _PROBE, backend], env=env, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "timed out creating a context"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit code {done.returncode}"
