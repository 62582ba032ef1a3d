# SPDX-License-Identifier: BSD-3-Clause
"""State playback: the logged joint states set kinematically and rendered to video.

No physics runs: what you see is what the robot logged (joints, IMU orientation, command markers),
which is how to check a bag by eye before asking why a replay drifts from it.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from batonlab.env.env import BatonEnv
from batonlab.logs.bag_reader import BagLog
from batonlab.logs.replay_env import imu_orientation_at, logged_qpos, set_markers


def playback_frames(log: BagLog, env: BatonEnv, size: tuple[int, int] = (240, 320), fps: float = 30.0,
                    max_frames: int = 3000, effects: bool = True,
                    progress_view: bool = False) -> list[np.ndarray]:
    """Render the logged joint states (set kinematically) at `fps`, from the bag's first to last sample.

    `progress_view`: render as frame-based learned rewards read (`BatonEnv.render_progress`, a bag used
    as a progress demo); else the scene's camera, with shadows and reflections if `effects`.
    """
    log.require("state playback", "joint_states")
    js = log.joint_states
    if js.t[-1] - js.t[0] <= 0:
        times = js.t[:1]
    else:
        times = np.arange(js.t[0], js.t[-1] + 1e-9, 1.0 / fps)[:max_frames]
    ids = torch.zeros(1, dtype=torch.long)
    frames = []
    for t in times:
        k = max(0, int(np.searchsorted(js.t, t + 1e-9, side="right")) - 1)
        qpos = logged_qpos(env, js.names, js.position[k], imu_orientation_at(log, t))
        env.sim.reset(ids, qpos[None].float(), torch.zeros(1, env.scene.model.nv))
        set_markers(env, log, t)
        frames.append((env.render_progress([0], size) if progress_view else env.render([0], size, effects=effects))[0])
    return frames


def write_playback(log: BagLog, env: BatonEnv, path: str | Path, size=(240, 320), fps: float = 30.0,
                   webm: bool = False) -> list[Path]:
    """State playback of the bag as an MP4 (see `playback_frames`), and a WebM copy for browsers.

    OpenCV's MP4 encoder (MPEG-4 part 2) is not played by browsers; the report page embeds the VP8
    WebM written next to it when `webm` is set. `env`: a replay env with nominal physics.
    """
    from batonlab.sim.render import write_mp4

    frames = playback_frames(log, env, size, fps)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_mp4(path, frames, fps=fps)
    paths = [path]
    if webm and _write_webm(path.with_suffix(".webm"), frames, fps):
        paths.append(path.with_suffix(".webm"))
    return paths


def _write_webm(path: Path, frames, fps: float) -> bool:
    import cv2

    height, width = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"vp80"), float(fps), (width, height))
    if not writer.isOpened():
        return False
    try:
        for frame in frames:
            writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    finally:
        writer.release()
    return True
