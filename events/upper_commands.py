# SPDX-License-Identifier: BSD-3-Clause
"""Recorded upper-level commands, played to a whole-body policy in training: the base velocities and tool poses an
upper level (a task's scripted expert, `batonlab.tasks.upper_commands`) issued at each control step, so that the lower
level learns the commands it will be given (held, changing every step, slow approaches, the tool held close)."""

from __future__ import annotations

import io
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from batonlab.env.terms import ManagerTerm
from batonlab.utils.files import atomic_write_bytes

VELOCITY_DIM, POSE_DIM = 2, 7
"""Width of a recorded base command (speed [m/s], yaw rate [rad/s]) and of a tool pose (position [m], quaternion
w, x, y, z; arm base frame)."""


class CommandRecordingError(ValueError):
    """A command recording is missing, unreadable or malformed (the message says which)."""


@dataclass(frozen=True)
class CommandRecording:
    """Upper-level command sequences, one per recorded episode, padded to the longest."""

    velocity: np.ndarray
    """(episodes, steps, 2) base speed [m/s] and yaw rate [rad/s]."""
    pose: np.ndarray
    """(episodes, steps, 7) tool position [m] and unit quaternion, arm base frame."""
    lengths: np.ndarray
    """(episodes,) steps recorded of each episode (≥ 1)."""
    step_dt: float
    """The control period they were issued at [s]."""
    sources: tuple[str, ...]
    """The task each episode was recorded on, (episodes,)."""

    def __post_init__(self):
        episodes = len(self.lengths)
        if episodes == 0:
            raise CommandRecordingError("a command recording holds no episodes")
        if self.velocity.ndim != 3 or self.velocity.shape[0] != episodes or self.velocity.shape[2] != VELOCITY_DIM:
            raise CommandRecordingError(f"velocity must be ({episodes}, steps, {VELOCITY_DIM}), got {self.velocity.shape}")
        if self.pose.shape != (*self.velocity.shape[:2], POSE_DIM):
            raise CommandRecordingError(f"pose must be {(*self.velocity.shape[:2], POSE_DIM)}, got {self.pose.shape}")
        if len(self.sources) != episodes:
            raise CommandRecordingError(f"{len(self.sources)} sources for {episodes} episodes")
        steps = self.velocity.shape[1]
        if self.lengths.min() < 1 or self.lengths.max() > steps:
            raise CommandRecordingError(f"episode lengths must be in [1, {steps}], got {self.lengths.min()}..{self.lengths.max()}")
        if not self.step_dt > 0.0:
            raise CommandRecordingError(f"step_dt must be > 0, got {self.step_dt}")
        recorded = self.recorded
        for name, values in (("velocity", self.velocity), ("pose", self.pose)):
            if not np.isfinite(values[recorded]).all():
                raise CommandRecordingError(f"the recording's {name} holds non-finite values")
        norms = np.linalg.norm(self.pose[recorded][:, 3:], axis=1)
        if np.abs(norms - 1.0).max() > 1e-3:
            raise CommandRecordingError(f"the recording's tool quaternions are not unit (norms {norms.min():.4f}..{norms.max():.4f})")

    @property
    def recorded(self) -> np.ndarray:
        """(episodes, steps) bool: the steps each episode recorded (the rest is padding)."""
        return np.arange(self.velocity.shape[1])[None, :] < self.lengths[:, None]

    def save(self, path: str | Path) -> None:
        """Write the recording to `path` (.npz), atomically."""
        buffer = io.BytesIO()
        np.savez_compressed(buffer, velocity=self.velocity.astype(np.float32), pose=self.pose.astype(np.float32),
                            lengths=self.lengths.astype(np.int64), step_dt=np.float64(self.step_dt),
                            sources=np.array(self.sources))
        atomic_write_bytes(Path(path), buffer.getvalue())

    @classmethod
    def join(cls, recordings: list[CommandRecording]) -> CommandRecording:
        """One recording of the episodes of `recordings` (all at one control period), padded to the longest."""
        periods = {r.step_dt for r in recordings}
        if len(periods) != 1:
            raise CommandRecordingError(f"recordings at different control periods {sorted(periods)} do not join")
        steps = max(r.velocity.shape[1] for r in recordings)

        def padded(values: np.ndarray) -> np.ndarray:
            return np.pad(values, ((0, 0), (0, steps - values.shape[1]), (0, 0)), mode="edge")

        return cls(np.concatenate([padded(r.velocity) for r in recordings]),
                   np.concatenate([padded(r.pose) for r in recordings]),
                   np.concatenate([r.lengths for r in recordings]), periods.pop(),
                   tuple(s for r in recordings for s in r.sources))

    @classmethod
    def load(cls, path: str | Path) -> CommandRecording:
        """The recording in `path`, checked."""
        path = Path(path)
        if not path.is_file():
            raise CommandRecordingError(f"no command recording at {path} (python scripts/record_upper_commands.py "
                                        "writes one)")
        try:
            with np.load(path, allow_pickle=False) as data:
                fields = {k: data[k] for k in ("velocity", "pose", "lengths", "step_dt", "sources")}
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
            raise CommandRecordingError(f"{path} is not a command recording: {err}") from None
        return cls(fields["velocity"], fields["pose"], fields["lengths"], float(fields["step_dt"]),
                   tuple(str(s) for s in fields["sources"]))


class PlayRecordedCommands(ManagerTerm):
    """Reset event: a `fraction` of the resetting envs play recorded upper-level commands this episode, each from a
    recorded episode drawn at random (the next one drawn when it ends); `play_recorded_commands` holds them every step.
    The other envs keep their command terms' own draws.

    Args:
        file: A `CommandRecording` (.npz), recorded at this task's control period.
        fraction: The share of episodes that play recordings.
        base_command: The base velocity command (its speed and yaw rate are played, its other fields kept).
        ee_command: The tool pose command (position and quaternion in the arm base frame).
    """

    def __init__(self, env, file: str | None, fraction: float = 0.5, base_command: str = "base_velocity",
                 ee_command: str = "ee_target"):
        if not 0.0 <= fraction <= 1.0:
            raise ValueError(f"PlayRecordedCommands: fraction must be in [0, 1], got {fraction}")
        if file is None:
            raise CommandRecordingError("name the upper-level command recording to play with "
                                        "env.events.upper_commands.params.file=FILE (python scripts/record_upper_commands.py "
                                        "writes one)")
        recording = CommandRecording.load(file)
        if abs(recording.step_dt - env.step_dt) > 1e-9:
            raise CommandRecordingError(f"{file} was recorded at a control period of {recording.step_dt} s; this task's "
                                        f"is {env.step_dt} s")
        terms = env.command_manager.terms
        self.base, self.ee = terms[base_command], terms[ee_command]
        if self.ee.dim != POSE_DIM:
            raise CommandRecordingError(f"command '{ee_command}' is {self.ee.dim}-wide; a recording plays tool poses "
                                        f"({POSE_DIM}: position and quaternion)")
        self.fraction = float(fraction)
        self.velocity = torch.as_tensor(recording.velocity, dtype=torch.float32, device=env.device)
        self.pose = torch.as_tensor(recording.pose, dtype=torch.float32, device=env.device)
        self.lengths = torch.as_tensor(recording.lengths, dtype=torch.long, device=env.device)
        n = env.num_envs
        self.playing = torch.zeros(n, dtype=torch.bool, device=env.device)
        """(num_envs,) whether each env plays a recording this episode."""
        self.episode = torch.zeros(n, dtype=torch.long, device=env.device)
        """(num_envs,) the recorded episode each env plays."""
        self.step = torch.zeros(n, dtype=torch.long, device=env.device)
        """(num_envs,) the next recorded step each env plays."""

    def __call__(self, env, env_ids: torch.Tensor) -> None:
        self.playing[env_ids] = env.uniform(len(env_ids), 0.0, 1.0) < self.fraction
        self._draw(env, env_ids)

    def _draw(self, env, env_ids: torch.Tensor) -> None:
        draw = env.uniform(len(env_ids), 0.0, 1.0) * len(self.lengths)
        self.episode[env_ids] = draw.long().clamp(max=len(self.lengths) - 1)
        self.step[env_ids] = 0

    def play(self, env, env_ids: torch.Tensor) -> None:
        """Hold the next recorded commands of the playing envs among `env_ids`."""
        ids = env_ids[self.playing[env_ids]]
        if not len(ids):
            return
        ended = ids[self.step[ids] >= self.lengths[self.episode[ids]]]
        if len(ended):
            self._draw(env, ended)
        episode, step = self.episode[ids], self.step[ids]
        self.base.hold(torch.cat([self.velocity[episode, step], self.base.command[ids, VELOCITY_DIM:]], dim=1), ids)
        self.ee.hold(self.pose[episode, step], ids)
        self.step[ids] += 1


def play_recorded_commands(env, env_ids: torch.Tensor, event: str) -> None:
    """Interval event (every control step: `interval_range_s=(0, 0)`): the `PlayRecordedCommands` event named `event`
    holds the next recorded commands of its playing envs."""
    env.event_manager.terms[event].play(env, env_ids)
