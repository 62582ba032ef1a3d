# SPDX-License-Identifier: BSD-3-Clause
"""A small convolutional frame encoder trained with a time-contrastive loss, and its versioned file.

Training sees only rendered episodes, no task labels and no progress: two frames close in time
should embed close together, frames far apart in time far apart (TCN, Sermanet et al. 2018, with
an InfoNCE loss). "Close in time" is asked within an episode and, for episodes of an aligned group
(rollouts of one policy on one task from a reset), across the group's episodes at the same frame
index, the way multi-view TCN pairs synchronised views. Frames of unrelated episodes are neither
positives nor negatives: they differ by where the target or the object is, and pushing them apart
would teach the encoder which episode a frame is from instead of how far the episode has got.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from batonlab.learned.errors import LearnedRewardError
from batonlab.utils.files import atomic_write_bytes

FORMAT = "batonlab.progress_encoder"
"""The `format` field of an encoder file."""

VERSION = 1
"""The file version this code writes and reads."""


class ProgressEncoderError(LearnedRewardError):
    """An encoder file that is missing, unreadable, of another kind or of a newer version."""


@dataclass
class EncoderCfg:
    """Architecture of the encoder (stored in its file)."""

    image_size: int = 64
    """Input frames are `image_size` × `image_size` RGB [pixels]."""
    channels: tuple[int, ...] = (8, 16, 32, 32)
    """Output channels of the stride-2 convolutions (each halves the image)."""
    hidden_dim: int = 128
    """Width of the fully connected layer after the convolutions."""
    embedding_dim: int = 32
    """Size of the L2-normalised embedding."""


@dataclass
class TrainCfg:
    """Time-contrastive training settings."""

    steps: int = 1500
    """Gradient steps (about 1 min on 2 idle CPU cores with the default encoder)."""
    episodes_per_batch: int = 6
    """Episodes drawn per step."""
    anchors_per_episode: int = 6
    """Anchor frames per episode; each brings one positive, and all other frames of the episode in the
    batch are its negatives or ignored."""
    positive_window: int = 1
    """A positive is at most this many frames from its anchor."""
    negative_gap: int = 4
    """Frames at least this many frames from the anchor are negatives; those between are ignored."""
    temperature: float = 0.1
    """Softmax temperature on cosine similarities."""
    learning_rate: float = 1e-3
    max_shift: int = 2
    """Random translation of each frame, ±pixels (augmentation)."""
    seed: int = 0


class ProgressEncoder(nn.Module):
    """Frames (N, H, W, 3) uint8 → embeddings (N, embedding_dim), unit length."""

    def __init__(self, cfg: EncoderCfg):
        super().__init__()
        self.cfg = cfg
        layers, previous = [], 3
        for width in cfg.channels:
            layers += [nn.Conv2d(previous, width, kernel_size=3, stride=2, padding=1), nn.ReLU()]
            previous = width
        self.conv = nn.Sequential(*layers)
        side = cfg.image_size // 2 ** len(cfg.channels)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(previous * side * side, cfg.hidden_dim), nn.ReLU(),
                                  nn.Linear(cfg.hidden_dim, cfg.embedding_dim))

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """Args:
            frames: (N, H, W, 3) uint8, or (N, 3, H, W) float in [0, 1] (already prepared).
        Returns:
            (N, embedding_dim) unit-length embeddings.
        """
        x = prepare(frames) if frames.dtype == torch.uint8 else frames
        return F.normalize(self.head(self.conv(x - 0.5)), dim=1)

    @torch.inference_mode()
    def embed(self, frames, batch_size: int = 256) -> torch.Tensor:
        """Embeddings of uint8 frames (N, H, W, 3) (numpy or torch), resized to the encoder's size, in batches."""
        frames = torch.as_tensor(np.asarray(frames) if not isinstance(frames, torch.Tensor) else frames)
        device = next(self.parameters()).device
        out = [self(resize(frames[i : i + batch_size].to(device), self.cfg.image_size))
               for i in range(0, len(frames), batch_size)]
        return torch.cat(out) if out else torch.zeros(0, self.cfg.embedding_dim, device=device)


def prepare(frames: torch.Tensor) -> torch.Tensor:
    """(N, H, W, 3) uint8 → (N, 3, H, W) float in [0, 1]."""
    return frames.permute(0, 3, 1, 2).float().div_(255.0)


def resize(frames: torch.Tensor, size: int) -> torch.Tensor:
    """(N, H, W, 3) uint8 frames resized to `size` × `size` (area averaging), still uint8."""
    if frames.shape[1:3] == (size, size):
        return frames
    x = F.interpolate(prepare(frames), size=(size, size), mode="area")
    return (x * 255.0).round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1)


def shift(x: torch.Tensor, max_shift: int, generator: torch.Generator) -> torch.Tensor:
    """Translate each image of (N, 3, H, W) by its own random integer offset in ±`max_shift` pixels (edge padding)."""
    if max_shift <= 0:
        return x
    n, c, h, w = x.shape
    padded = F.pad(x, (max_shift,) * 4, mode="replicate")
    offsets = torch.randint(0, 2 * max_shift + 1, (n, 2), generator=generator)
    rows = (offsets[:, :1] + torch.arange(h)).view(n, 1, h, 1)
    cols = (offsets[:, 1:] + torch.arange(w)).view(n, 1, 1, w)
    return padded[torch.arange(n).view(n, 1, 1, 1), torch.arange(c).view(1, c, 1, 1), rows, cols]


# Training.


def time_contrastive_loss(embeddings: torch.Tensor, times: torch.Tensor, episodes: torch.Tensor, groups: torch.Tensor,
                          cfg: TrainCfg, anchors: torch.Tensor) -> torch.Tensor:
    """Multi-positive InfoNCE over time, within episodes and across the episodes of an aligned group.

    Args:
        embeddings: (N, D) unit embeddings of the batch's frames.
        times: (N,) frame index of each in its episode.
        episodes: (N,) episode of each.
        groups: (N,) aligned group of each (an episode outside any group is a group of its own).
        anchors: (A,) indices into the batch of the anchor frames.
    """
    similarity = embeddings[anchors] @ embeddings.T / cfg.temperature
    related = groups[anchors, None] == groups[None, :]
    itself = (episodes[anchors, None] == episodes[None, :]) & (times[anchors, None] == times[None, :])
    gap = (times[anchors, None] - times[None, :]).abs()
    positive = related & (gap <= cfg.positive_window) & ~itself
    negative = related & (gap >= cfg.negative_gap)
    candidates = positive | negative
    log_all = torch.logsumexp(similarity.masked_fill(~candidates, -torch.inf), dim=1)
    log_positive = torch.logsumexp(similarity.masked_fill(~positive, -torch.inf), dim=1)
    usable = positive.any(dim=1) & negative.any(dim=1)
    return (log_all - log_positive)[usable].mean()


def train_encoder(episodes: Sequence[np.ndarray], encoder_cfg: EncoderCfg | None = None, cfg: TrainCfg | None = None,
                  aligned_groups: Sequence[int | None] | None = None, progress_bar: bool = True) -> ProgressEncoder:
    """Train an encoder on episodes of frames, each (num_frames, H, W, 3) uint8 (resized to the encoder's size).

    Each step draws `episodes_per_batch` episodes (half of them from one aligned group, when there
    are any) and in each `anchors_per_episode` anchors with a positive next to it (within
    `positive_window` frames). Related frames are those of the same episode and, for an episode of
    an aligned group, of the group's other episodes; a related frame within `positive_window` frames
    of the anchor's time is a positive, one at least `negative_gap` away a negative.

    Args:
        aligned_groups: Per episode, None or a group id. Episodes of one group are rollouts of the same
            policy on the same task from a reset, rendered at the same spacing: their k-th frames
            show the same moment of the task (why: docs/modules/batonlab.learned.progress_encoder.md).
            Random-action episodes belong to no group.
    """
    encoder_cfg, cfg = encoder_cfg or EncoderCfg(), cfg or TrainCfg()
    aligned_groups = list(aligned_groups) if aligned_groups is not None else [None] * len(episodes)
    if len(aligned_groups) != len(episodes):
        raise ValueError(f"{len(aligned_groups)} aligned_groups for {len(episodes)} episodes")
    keep = [i for i, e in enumerate(episodes) if len(e) > cfg.negative_gap]
    if not keep:
        raise ValueError(f"no episode has more than negative_gap={cfg.negative_gap} frames")
    generator = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    data = [prepare(resize(torch.as_tensor(episodes[i]), encoder_cfg.image_size)) for i in keep]
    # Group ids: aligned groups keep theirs (offset past the episode count), lone episodes get their index.
    group_of = torch.tensor([len(keep) + int(aligned_groups[i]) if aligned_groups[i] is not None else k
                             for k, i in enumerate(keep)])
    members = [torch.nonzero(group_of == g).flatten() for g in group_of.unique() if g >= len(keep)]
    encoder = ProgressEncoder(encoder_cfg)
    optimizer = torch.optim.Adam(encoder.parameters(), lr=cfg.learning_rate)
    bar = tqdm(range(cfg.steps), desc="train encoder", unit="step", disable=not progress_bar)
    for _ in bar:
        images, times, owners = [], [], []
        picks = torch.randint(len(data), (cfg.episodes_per_batch,), generator=generator)
        if members:
            group = members[int(torch.randint(len(members), (1,), generator=generator))]
            half = cfg.episodes_per_batch // 2
            picks[:half] = group[torch.randint(len(group), (half,), generator=generator)]
        for e in picks.tolist():
            length = len(data[e])
            anchor_t = torch.randint(length, (cfg.anchors_per_episode,), generator=generator)
            offset = torch.randint(1, cfg.positive_window + 1, (cfg.anchors_per_episode,), generator=generator)
            sign = torch.where(torch.rand(cfg.anchors_per_episode, generator=generator) < 0.5, -1, 1)
            positive_t = anchor_t + sign * offset
            positive_t = torch.where((positive_t < 0) | (positive_t >= length), anchor_t - sign * offset, positive_t)
            t = torch.cat([anchor_t, positive_t])
            images.append(data[e][t])
            times.append(t)
            owners.append(torch.full_like(t, e))
        x = shift(torch.cat(images), cfg.max_shift, generator)
        times, owners = torch.cat(times), torch.cat(owners)
        anchors = torch.cat([k * 2 * cfg.anchors_per_episode + torch.arange(cfg.anchors_per_episode)
                             for k in range(cfg.episodes_per_batch)])
        loss = time_contrastive_loss(encoder(x), times, owners, group_of[owners], cfg, anchors)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
    return encoder.eval()


# The versioned file.


def save_encoder(path: str | Path, encoder: ProgressEncoder, tasks: Sequence[str], num_frames: int,
                 train_cfg: TrainCfg | None = None) -> Path:
    """Write the encoder file atomically (`files.atomic_write_bytes`)."""
    payload = {
        "format": FORMAT,
        "version": VERSION,
        "image_size": encoder.cfg.image_size,
        "embedding_dim": encoder.cfg.embedding_dim,
        "architecture": {**asdict(encoder.cfg), "channels": list(encoder.cfg.channels)},
        "state_dict": encoder.state_dict(),
        "tasks": list(tasks),
        "num_frames": int(num_frames),
        "train": asdict(train_cfg) if train_cfg is not None else {},
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return atomic_write_bytes(path, buffer.getbuffer())


def load_encoder(path: str | Path, device: str | torch.device = "cpu") -> ProgressEncoder:
    """Read an encoder file written by `save_encoder`; `ProgressEncoderError` for anything else."""
    payload = read_encoder_file(path)
    architecture = dict(payload["architecture"])
    architecture["channels"] = tuple(architecture["channels"])
    try:
        encoder = ProgressEncoder(EncoderCfg(**architecture))
        encoder.load_state_dict(payload["state_dict"])
    except (TypeError, RuntimeError) as err:
        raise ProgressEncoderError(f"{path}: the weights do not fit the architecture it names: {err}") from None
    encoder.training_tasks = tuple(payload["tasks"])
    return encoder.to(device).eval()


def read_encoder_file(path: str | Path) -> dict:
    """The checked contents of an encoder file (format, version and fields)."""
    path = Path(path)
    if not path.is_file():
        raise ProgressEncoderError(f"progress encoder {path} does not exist; train one with `batonlab reward fit-progress`")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several kinds for a cut or foreign file
        raise ProgressEncoderError(f"{path} is not a readable progress encoder file ({type(err).__name__}: "
                                   f"{' '.join(str(err).split())[:200]})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ProgressEncoderError(f"{path} is not a progress encoder file (expected format '{FORMAT}')")
    version = payload.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise ProgressEncoderError(f"{path} is a progress encoder of version {version}; this batonlab reads "
                                   f"version {VERSION} and older: update batonlab")
    missing = {"architecture", "state_dict", "tasks", "num_frames", "image_size", "embedding_dim"} - set(payload)
    if missing:
        raise ProgressEncoderError(f"{path}: the encoder file lacks {sorted(missing)}")
    return payload
