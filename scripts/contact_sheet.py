# SPDX-License-Identifier: BSD-3-Clause
"""Lay frames of a rollout video side by side in one picture, each labelled with its frame number (docs figures).

    python scripts/contact_sheet.py VIDEO OUT.png [--frames 0 171 ...] [--count 8] [--columns 4] [--width 320]

Without `--frames`, `--count` frames evenly spaced over the whole video.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np


def read_frames(video: Path, indices: list[int]) -> list[np.ndarray]:
    """The frames of `video` at `indices` (BGR images); a clear error for an unreadable video or index."""
    capture = cv2.VideoCapture(str(video))
    if not capture.isOpened():
        raise SystemExit(f"contact_sheet: cannot open {video}")
    frames = []
    for index in indices:
        capture.set(cv2.CAP_PROP_POS_FRAMES, index)
        ok, frame = capture.read()
        if not ok:
            raise SystemExit(f"contact_sheet: {video} has no frame {index}")
        frames.append(frame)
    capture.release()
    return frames


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("video", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--frames", type=int, nargs="+", default=None)
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--columns", type=int, default=4)
    parser.add_argument("--width", type=int, default=320, help="width of each tile [px]")
    args = parser.parse_args()
    total = int(cv2.VideoCapture(str(args.video)).get(cv2.CAP_PROP_FRAME_COUNT))
    indices = args.frames or np.linspace(0, total - 1, args.count).round().astype(int).tolist()
    tiles = []
    for index, frame in zip(indices, read_frames(args.video, indices)):
        tile = cv2.resize(frame, (args.width, round(frame.shape[0] * args.width / frame.shape[1])))
        cv2.putText(tile, str(index), (5, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (255, 255, 255), 2)
        tiles.append(tile)
    blank = np.zeros_like(tiles[0])
    tiles += [blank] * (-len(tiles) % args.columns)
    rows = [np.hstack(tiles[k:k + args.columns]) for k in range(0, len(tiles), args.columns)]
    cv2.imwrite(str(args.out), np.vstack(rows))
    print(f"contact_sheet: {len(indices)} frames of {args.video} -> {args.out}")


if __name__ == "__main__":
    main()
