# SPDX-License-Identifier: BSD-3-Clause
"""Preference labels on states, fitted into a potential Φ with a Bradley–Terry loss.

A labeller says which of two states is closer to completing the task: a vision-language model looking
at two rendered frames (`VlmLabeller`, through `ChatClient`), or the simulator's true task progress
(`ScriptedLabeller`, for users without a VLM and for tests). Φ is then fitted so that
P(a ≻ b) = σ(Φ(a) − Φ(b)) matches the labels, and used as potential-based shaping γΦ(s′) − Φ(s)
(`batonlab.rewards.learned.PotentialShaping`), which leaves the optimal policy unchanged.

Why Φ reads state features and not images: the labels need pictures (that is what a VLM
understands), but the reward is evaluated for every env at every step, and rendering thousands of
frames per step is out of reach on CPU. So each labelled state keeps both its frame (shown to the
labeller) and its observation-group features (what Φ reads); Φ learns the labeller's judgement as
a function of the state. Φ is frozen while a policy trains on it (one phase); a next phase collects
states with that policy (`fit-potential policy=RUN_DIR`), labels and refits.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from batonlab.learned.errors import LearnedRewardError, one_line
from batonlab.learned.features import field_specs, read_features
from batonlab.rl.rollout import held_uniform, rollout
from batonlab.utils.files import atomic_write_bytes

POTENTIAL_FORMAT = "batonlab.potential"
POTENTIAL_VERSION = 1


@dataclass
class StateSamples:
    """States visited by rollouts: what Φ reads, what a labeller judges."""

    features: torch.Tensor
    """(N, dim) observation-group features."""
    progress: torch.Tensor
    """(N,) the simulator's true task progress (read only by the scripted labeller and for evaluation)."""
    frames: np.ndarray | None
    """(N, H, W, 3) uint8 frames of the same states (None when nothing was rendered)."""


@torch.inference_mode()
def collect_states(env, progress_fn: Callable, group: str, steps: int, policy: Callable | None = None,
                   every: int = 5, rendered_per_sample: int = 8, size: tuple[int, int] = (64, 64),
                   render: bool = True, hold: int = 10, fields: list[str] | None = None) -> StateSamples:
    """Roll out `policy` and keep states every `every` steps.

    Without a policy, each env holds a uniform random action in [-1, 1] for `hold` steps: a new
    random action every step averages out and leaves the robot near its start (a potential fitted
    on such states knows nothing of the states a learning policy reaches); held actions carry it
    across its workspace. `fields` restricts the features to some fields of the group.

    At each sample step, `rendered_per_sample` envs (rotating) are rendered and kept; the other
    envs' states are not kept (a labelled pair needs both frames). Without `render`, every env's
    features are kept (the scripted labeller needs no frames).
    """
    obs, _ = env.reset()
    features, progress, frames = [], [], []
    cursor = 0
    held = held_uniform(env, hold)
    for transition in rollout(env, obs, policy if policy is not None else held, steps):
        if (transition.index + 1) % every:
            continue
        now_features, now_progress = read_features(env, group, fields), progress_fn(env).float()
        if render:
            ids = (torch.arange(rendered_per_sample) + cursor) % env.num_envs
            cursor = int(ids[-1]) + 1
            frames.append(env.render(ids.tolist(), size=size, effects=False))
            now_features, now_progress = now_features[ids.to(env.device)], now_progress[ids.to(env.device)]
        features.append(now_features.cpu())
        progress.append(now_progress.cpu())
    if not features:
        raise ValueError(f"collect_states: {steps} steps with a sample every {every} steps keep no state")
    return StateSamples(torch.cat(features), torch.cat(progress), np.concatenate(frames) if frames else None)


def random_pairs(count: int, num_pairs: int, generator: torch.Generator) -> torch.Tensor:
    """(num_pairs, 2) indices of distinct states."""
    a = torch.randint(0, count, (num_pairs,), generator=generator)
    b = (a + torch.randint(1, count, (num_pairs,), generator=generator)) % count
    return torch.stack([a, b], dim=1)


class ScriptedLabeller:
    """Prefers the state with the higher true progress; with `temperature` > 0, labels are drawn from a
    Bradley–Terry model of the true progress (a noisy annotator)."""

    def __init__(self, temperature: float = 0.0, seed: int = 0):
        self.temperature = temperature
        self.generator = torch.Generator().manual_seed(seed)

    def label(self, samples: StateSamples, pairs: torch.Tensor) -> torch.Tensor:
        """(num_pairs,) float: 1 where the second state of the pair is preferred, 0 where the first is."""
        diff = samples.progress[pairs[:, 1]] - samples.progress[pairs[:, 0]]
        if self.temperature <= 0.0:
            return (diff > 0).float()
        return torch.bernoulli(torch.sigmoid(diff / self.temperature), generator=self.generator)


class VlmLabeller:
    """Asks a vision-language model which of two frames is closer to completing `task`.

    Unparsable or failed answers are dropped (the client counts them); labelling never raises.
    """

    def __init__(self, client, task: str):
        self.client, self.task = client, task

    def label(self, samples: StateSamples, pairs: torch.Tensor) -> torch.Tensor:
        """(num_pairs,) float: 1 = second preferred, 0 = first, NaN = no usable answer."""
        if samples.frames is None:
            raise ValueError("the VLM labeller needs frames: collect states with render=True")
        questions = [(samples.frames[int(a)], samples.frames[int(b)]) for a, b in pairs]
        answers = self.client.ask_preferences(questions, self.task)
        return torch.tensor([float("nan") if ans is None else float(ans) for ans in answers])


class ImageProgressOracle:
    """The preference oracle of a stand-in VLM server: answers "A" or "B" from the true progress of the
    states whose frames it is shown (frames are registered with their progress when rendered).

    It lets the whole VLM path (PNG encoding, HTTP, parsing, caching, retries) run for real in tests
    and benchmarks, with the privileged-state labeller behind the API.
    """

    def __init__(self):
        self._progress: dict[str, float] = {}

    @staticmethod
    def key(frame: np.ndarray) -> str:
        """Hash that identifies a (H, W, 3) uint8 frame by its pixels."""
        return hashlib.sha256(np.ascontiguousarray(frame, dtype=np.uint8).tobytes()).hexdigest()

    def register(self, frames: np.ndarray, progress: torch.Tensor) -> None:
        """Remember the true progress (N,) of each of the frames (N, H, W, 3) for later answers."""
        for frame, value in zip(frames, progress.tolist()):
            self._progress[self.key(frame)] = value

    def __call__(self, image_a: np.ndarray, image_b: np.ndarray, text: str) -> str:
        a, b = self._progress.get(self.key(image_a)), self._progress.get(self.key(image_b))
        if a is None or b is None:
            return "I cannot tell: I have not seen these images."
        return "B" if b > a else "A"


class PotentialModel(nn.Module):
    """Φ(features) = MLP(normalised features); inputs normalised with the training states' statistics."""

    def __init__(self, dim: int, hidden: tuple[int, ...] = (64, 64)):
        super().__init__()
        layers, width = [], dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ELU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)
        self.hidden = tuple(hidden)
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("std", torch.ones(dim))
        self.register_buffer("scale", torch.ones(()))
        """Divides Φ so that its spread over the training states is 1 (the shaping weight is then in reward units)."""

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """Φ of each state: features (N, dim) -> potentials (N,)."""
        return self.net((features - self.mean) / self.std).squeeze(-1) / self.scale


@dataclass
class FitResult:
    """A fitted potential model with its train and held-out pair accuracies."""
    model: PotentialModel
    train_accuracy: float
    heldout_accuracy: float
    """Fraction of held-out labelled pairs Φ orders as the labeller did."""
    num_pairs: int
    dropped: int
    """Pairs without a usable label (VLM answers that failed or did not parse)."""


def fit_potential(samples: StateSamples, pairs: torch.Tensor, labels: torch.Tensor, epochs: int = 300,
                  lr: float = 3e-3, heldout: float = 0.2, seed: int = 0, hidden: tuple[int, ...] = (64, 64)) -> FitResult:
    """Bradley–Terry fit: minimise BCE(σ(Φ(b) − Φ(a)), label) over labelled pairs (full batch, Adam)."""
    keep = ~torch.isnan(labels)
    pairs, labels, dropped = pairs[keep], labels[keep], int((~keep).sum())
    if len(pairs) < 10:
        raise ValueError(f"only {len(pairs)} usable preference labels ({dropped} dropped): too few to fit a potential")
    with _one_thread():
        return _fit(samples, pairs, labels, dropped, epochs, lr, heldout, seed, hidden)


def _fit(samples, pairs, labels, dropped, epochs, lr, heldout, seed, hidden) -> FitResult:
    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(pairs), generator=generator)
    split = max(1, int(len(pairs) * heldout))
    test, train = order[:split], order[split:]
    torch.manual_seed(seed)
    model = PotentialModel(samples.features.shape[1], hidden)
    model.mean.copy_(samples.features.mean(0))
    model.std.copy_(samples.features.std(0).clamp_min(1e-6))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=1e-4)
    features = samples.features.float()
    for _ in range(epochs):
        phi = model(features)
        logits = phi[pairs[train, 1]] - phi[pairs[train, 0]]
        loss = nn.functional.binary_cross_entropy_with_logits(logits, labels[train])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    with torch.no_grad():
        phi = model(features)
        model.scale.copy_(phi.std().clamp_min(1e-6))
        phi = model(features)
        agree = ((phi[pairs[:, 1]] > phi[pairs[:, 0]]).float() == labels).float()
    return FitResult(model, float(agree[train].mean()), float(agree[test].mean()), len(pairs), dropped)


@contextlib.contextmanager
def _one_thread():
    """Run the block on one torch thread: a tiny network trains fastest so, and torch's worker threads
    spin-wait for each other when other processes keep the cores busy (docs/modules/batonlab.learned.preference.md)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def save_potential(path: str | Path, model: PotentialModel, env, group: str, info: dict,
                   fields: list[str] | None = None) -> Path:
    """Versioned file: Φ's weights, the observation group and the fields it reads (checked when loaded), `info`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "format": POTENTIAL_FORMAT, "version": POTENTIAL_VERSION, "group": group,
        "fields": [(s.name, s.size) for s in field_specs(env, group, fields)], "hidden": list(model.hidden),
        "dim": int(model.mean.numel()), "state_dict": model.state_dict(), "info": info,
    }
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return atomic_write_bytes(path, buffer.getbuffer())


class PotentialFileError(LearnedRewardError):
    """A potential file that is missing, unreadable, of another kind or version, or fitted on other fields."""


def load_potential(path: str | Path) -> tuple[PotentialModel, dict]:
    """(Φ in eval mode with frozen weights, the file's header); a clear error for anything else."""
    path = Path(path)
    if not path.is_file():
        raise PotentialFileError(f"potential file '{path}' does not exist (write one with: batonlab reward fit-potential)")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise PotentialFileError(f"'{path}' is not a readable potential file ({type(err).__name__}: {one_line(err)})"
                                 ) from None
    if not isinstance(payload, dict) or payload.get("format") != POTENTIAL_FORMAT:
        raise PotentialFileError(f"'{path}' is not a batonlab potential file (format {payload.get('format') if isinstance(payload, dict) else type(payload).__name__!r})")
    if payload.get("version") != POTENTIAL_VERSION:
        raise PotentialFileError(f"'{path}' has potential format version {payload.get('version')}; this batonlab reads version {POTENTIAL_VERSION}")
    model = PotentialModel(payload["dim"], tuple(payload["hidden"]))
    model.load_state_dict(payload["state_dict"])
    model.eval().requires_grad_(False)
    return model, {k: v for k, v in payload.items() if k != "state_dict"}


def check_fields(header: dict, env, where: str) -> None:
    """The env's observation group must have the fields Φ was fitted on."""
    want = [tuple(f) for f in header["fields"]]
    try:
        have = [(s.name, s.size) for s in field_specs(env, header["group"], [name for name, _ in want])]
    except KeyError:
        have = [(s.name, s.size) for s in field_specs(env, header["group"])]
    if have != want:
        raise PotentialFileError(f"{where}: the potential was fitted on group '{header['group']}' fields {want}, "
                         f"but this task's group has {have}")
