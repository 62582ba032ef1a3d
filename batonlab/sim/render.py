# SPDX-License-Identifier: BSD-3-Clause
"""Offscreen rendering without a display (EGL by default, OSMesa as the fallback).

MuJoCo picks its GL platform from `MUJOCO_GL` when it is imported, so `batonlab/__init__.py`
sets the default before anything imports mujoco. The Debian packages this needs (libegl1,
libgl1, libegl-mesa0 / libosmesa6) are installed by `scripts/setup.sh`.
"""

from __future__ import annotations

import os

import mujoco


def make_renderer(model: mujoco.MjModel, height: int, width: int) -> mujoco.Renderer:
    """An offscreen renderer, with an error that says what to install when GL is missing."""
    # The offscreen buffer must be at least as large as the image.
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)
    model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    try:
        return mujoco.Renderer(model, height, width)
    except Exception as err:  # pragma: no cover - depends on the machine's GL stack
        raise RuntimeError(
            f"offscreen rendering failed with MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}: {err}. "
            "Install the GL libraries (`sudo apt-get install libegl1 libgl1 libegl-mesa0 libosmesa6`), and set "
            "MUJOCO_GL=egl (or osmesa) before mujoco is first imported (importing batonlab first does this)."
        ) from err


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
