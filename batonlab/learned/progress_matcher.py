# SPDX-License-Identifier: BSD-3-Clause
"""Progress against one reference demonstration: each query frame is matched to the nearest demo
frame in embedding space; where along the demo that frame lies is the progress estimate.

Demo sources: an MP4 (any video OpenCV reads), an `.npz` with a `frames` array (T, H, W, 3) uint8 as
`save_demo` writes it (e.g. from a `play` rollout collected with `frames.collect_rollouts`), or a
rosbag2 bag folder, whose logged joint states are set in the bag's task and rendered
(`batonlab.logs.playback.playback_frames`).

Confidence is the match margin: `1 - d_best / d_other`, where `d_best` is the distance to the best
demo frame and `d_other` the distance to the best demo frame outside a window of ±`window` frames
around it. A frame that looks like one phase of the demo gets a margin near 1; a frame that looks
alike two distant phases (the arm passing the same pose going out and coming back, or a state the
demo never showed, which is about equally far from everything) gets a margin near 0, and its index
says little about progress. A ratio rather than a difference keeps the threshold independent of
how tightly a given encoder packs its embeddings.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from batonlab.env.cfg import TaskCfg
from batonlab.learned.errors import LearnedRewardError, one_line
from batonlab.learned.progress_encoder import ProgressEncoder


class DemoError(LearnedRewardError):
    """A demonstration that is missing, unreadable or empty."""


def save_demo(path: str | Path, frames: np.ndarray, fps: float | None = None) -> Path:
    """Write demo frames (T, H, W, 3) uint8 to an `.npz` (`frames`, and `fps` when known)."""
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8 or len(frames) < 2:
        raise ValueError(f"save_demo: expected (T >= 2, H, W, 3) uint8 frames, got {frames.shape} {frames.dtype}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    extra = {"fps": np.float32(fps)} if fps else {}
    np.savez_compressed(path, frames=frames, **extra)
    return path


def load_demo(path: str | Path, size: int | None = None, bag_fps: float = 10.0,
              scene: TaskCfg | None = None) -> np.ndarray:
    """Demo frames (T, H, W, 3) uint8 from an `.mp4` (or other video), an `.npz` or a rosbag2 folder.

    Args:
        size: Resize frames to `size` × `size` (None: keep them as stored; bags render at 64).
        bag_fps: Frames per second of a bag's playback.
        scene: The task config a bag is played back in (its task's play config); needed for a bag.
    """
    path = Path(path)
    if not path.exists():
        raise DemoError(f"demo {path} does not exist")
    if path.is_dir():
        frames = _bag_frames(path, size or 64, bag_fps, scene)
    elif path.suffix == ".npz":
        frames = _npz_frames(path)
    else:
        frames = _video_frames(path)
    if len(frames) < 2:
        raise DemoError(f"demo {path} has {len(frames)} frame(s); a progress demo needs at least 2")
    if size is not None and frames.shape[1:3] != (size, size):
        import cv2

        frames = np.stack([cv2.resize(f, (size, size), interpolation=cv2.INTER_AREA) for f in frames])
    return np.ascontiguousarray(frames, dtype=np.uint8)


DEMO_PROGRESS = ("arclength", "index")
"""How a demo frame's progress is measured: along the embedding path (default) or by its time index."""


class ProgressMatcher:
    """Matches frames to one embedded demonstration.

    Args:
        encoder: A trained `ProgressEncoder` (its device is where matching runs).
        demo_frames: (T, H, W, 3) uint8 frames of the demo, start to success.
        window: Demo frames within ±`window` of the best match do not count as the runner-up of the margin.
        soft_neighbors: Progress is the weighted mean progress of the nearest `soft_neighbors` demo frames
            (1: the plain argmin), weights falling by 1/e per 5 % of extra distance relative to the best
            match: a query between two demo frames lands between them instead of jumping.
        demo_progress: A demo frame's progress: "arclength" (default), its share of the demo's path in
            embedding space, so that repeated frames (a demo that pauses) share one progress; "index",
            its time index over (T - 1). Neither fixes a demo with a long tail of holding still: the
            embedding's small frame-to-frame jitter adds up along the tail (an example:
            docs/modules/batonlab.learned.progress_matcher.md). Cut demos where the task is done.
    """

    def __init__(self, encoder: ProgressEncoder, demo_frames: np.ndarray, window: int = 3, soft_neighbors: int = 3,
                 demo_progress: str = "arclength"):
        if demo_progress not in DEMO_PROGRESS:
            raise ValueError(f"demo_progress '{demo_progress}' is not one of {list(DEMO_PROGRESS)}")
        self.encoder = encoder
        self.demo = encoder.embed(demo_frames)
        """(T, D) demo embeddings."""
        self.length = len(self.demo)
        self.demo_progress = _demo_progress(self.demo, demo_progress)
        """(T,) progress of each demo frame, 0 at the first and 1 at the last."""
        self.window = window
        self.soft_neighbors = max(1, min(soft_neighbors, self.length))
        self.device = self.demo.device

    @torch.inference_mode()
    def match(self, frames) -> tuple[torch.Tensor, torch.Tensor]:
        """Progress and confidence of query frames.

        Args:
            frames: (N, H, W, 3) uint8 (numpy or torch).
        Returns:
            progress: (N,) in [0, 1], progress of the matched demo frames (`demo_progress`).
            confidence: (N,) match margin in [0, 1] (see the module docstring).
        """
        return self.match_embeddings(self.encoder.embed(frames))

    @torch.inference_mode()
    def match_embeddings(self, queries: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`match` for (N, D) embeddings."""
        distance = torch.cdist(queries, self.demo)  # (N, T)
        best_distance, best = distance.min(dim=1)
        index = torch.arange(self.length, device=self.device)
        outside = (index[None, :] - best[:, None]).abs() > self.window
        other = distance.masked_fill(~outside, torch.inf).min(dim=1).values
        confidence = torch.where(torch.isfinite(other), 1.0 - best_distance / other.clamp(min=1e-6),
                                 torch.ones_like(best_distance)).clamp(0.0, 1.0)
        near_distance, near = distance.topk(self.soft_neighbors, dim=1, largest=False)
        # A neighbour 5 % farther than the best match weighs 1/e of it; an exact match (distance 0) alone counts.
        relative = near_distance / near_distance[:, :1].clamp(min=1e-6) - 1.0
        weights = torch.softmax(-relative / 0.05, dim=1)
        progress = (weights * self.demo_progress[near]).sum(dim=1)
        return progress, confidence


# Private functions.


def _demo_progress(embeddings: torch.Tensor, kind: str) -> torch.Tensor:
    """Progress of each demo frame: its index over (T - 1), or the embedding path length up to it over
    the whole path, under which identical frames get identical progress wherever they fall in time."""
    length = len(embeddings)
    if kind == "index" or length < 2:
        return torch.arange(length, device=embeddings.device, dtype=torch.float32) / max(length - 1, 1)
    steps = (embeddings[1:] - embeddings[:-1]).norm(dim=1)
    path = torch.cat([steps.new_zeros(1), steps.cumsum(0)])
    return path / path[-1].clamp(min=1e-12)


def _npz_frames(path: Path) -> np.ndarray:
    try:
        with np.load(path, allow_pickle=False) as data:
            if "frames" not in data:
                raise DemoError(f"demo {path} has no 'frames' array (it holds {list(data.keys())})")
            frames = data["frames"]
    except DemoError:
        raise
    except Exception as err:  # zipfile and numpy raise several kinds for a damaged file
        raise DemoError(f"demo {path} is not a readable .npz ({type(err).__name__}: {one_line(err)})") from None
    if frames.ndim != 4 or frames.shape[-1] != 3 or frames.dtype != np.uint8:
        raise DemoError(f"demo {path}: 'frames' must be (T, H, W, 3) uint8, got {frames.shape} {frames.dtype}")
    return frames


def _video_frames(path: Path) -> np.ndarray:
    import cv2

    capture = cv2.VideoCapture(str(path))
    frames = []
    try:
        while capture.isOpened():
            ok, frame = capture.read()
            if not ok:
                break
            frames.append(cv2.cvtColor(frame, cv2.COLOR_BGR2RGB))
    finally:
        capture.release()
    if not frames:
        raise DemoError(f"demo {path}: OpenCV read no frames (not a video, or a codec it lacks)")
    return np.stack(frames)


def _bag_frames(path: Path, size: int, fps: float, scene: TaskCfg | None) -> np.ndarray:
    from batonlab.logs.bag_reader import BagError, open_bag
    from batonlab.logs.playback import playback_frames
    from batonlab.logs.replay_env import make_replay_env

    try:
        log = open_bag(path)
        if scene is None:
            raise DemoError(f"demo {path}: a bag demo is played back in its task's scene; pass the task config")
        env = make_replay_env(log, scene, "nominal")
    except BagError as err:
        raise DemoError(f"demo {path}: {one_line(err)}") from None
    try:
        return np.stack(playback_frames(log, env, size=(size, size), fps=fps, progress_view=True))
    finally:
        env.close()
