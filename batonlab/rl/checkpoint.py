# SPDX-License-Identifier: BSD-3-Clause
"""Checkpoint files: atomic writes, safe loading, and finding the newest readable one in a run folder.

A checkpoint is written to a temporary file next to it (`.model_<it>.pt.<random>.tmp`) and renamed
over `model_<it>.pt`, so a crash mid-write never leaves a truncated `model_*.pt`; a process killed
mid-write (`kill -9`) leaves the temporary, which `remove_stale_temporaries` deletes.
"""

from __future__ import annotations

import io
import pickle
import re
from pathlib import Path

import torch

from batonlab.utils import files

CHECKPOINT_VERSION = 1
"""`version` of the checkpoints `BatonRunner.state_dict` writes."""

_CHECKPOINT = re.compile(r"model_(\d+)\.pt$")
_TEMPORARY_GLOB = ".model_*.pt.*.tmp"
_CONFIG_TEMPORARY_GLOB = ".config.yaml.*.tmp"
_ZIP_MAGIC = b"PK\x03\x04"
"""The first bytes of a `torch.save` file (a zip archive since torch 1.6)."""
_REQUIRED_KEYS = ("version", "iter", "total_env_steps")
"""Keys every batonlab checkpoint holds, besides its models (`actor_state_dict`, `student_state_dict`, ...)."""
_LAYOUT = f"batonlab train writes a dict with keys {list(_REQUIRED_KEYS)} and its models' tensors"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used: unreadable, truncated, or made for another model."""


def save_atomic(obj: dict, path: str | Path) -> Path:
    """Serialize `obj` with torch.save and write it atomically to `path` (`files.atomic_write_bytes`).

    Serialized in memory first, so a full disk is an OSError naming `path` (not torch's writer error).
    """
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return files.atomic_write_bytes(path, buffer.getbuffer())


def load(path: str | Path, map_location: str | torch.device = "cpu") -> dict:
    """Load a checkpoint with `weights_only=True` (no arbitrary code from pickles).

    Raises:
        FileNotFoundError: There is no file at `path`.
        CheckpointError: The file is truncated, corrupt or not a checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    with path.open("rb") as f:
        if f.read(len(_ZIP_MAGIC)) != _ZIP_MAGIC:  # before torch.load, which warns about what it then fails to read
            raise CheckpointError(f"checkpoint {path} is not a batonlab checkpoint: not a torch.save file (corrupt, "
                                  f"or written by another program; {_LAYOUT})")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:
        raise _unreadable(path, err) from err
    if not isinstance(state, dict):
        raise CheckpointError(f"checkpoint {path} holds a {type(state).__name__}, not a checkpoint dict")
    return state


def check_batonlab(state: dict, path: str | Path, what: str = "checkpoint") -> None:
    """Check that a loaded `state` is a checkpoint of this batonlab's format (`BatonRunner.state_dict`).

    Raises:
        CheckpointError: It lacks the keys every batonlab checkpoint has, or has another `version`.
    """
    missing = [key for key in _REQUIRED_KEYS if key not in state]
    if missing:
        keys = sorted(map(str, state))
        shown = keys[:8] + (["..."] if len(keys) > 8 else [])
        raise CheckpointError(f"{what} {path} is not a batonlab checkpoint: it has keys {shown}; {_LAYOUT}")
    if state["version"] != CHECKPOINT_VERSION:
        raise CheckpointError(f"{what} {path} has version {state['version']}, expected {CHECKPOINT_VERSION}")


def checkpoints(run_dir: str | Path) -> list[Path]:
    """The `model_<iteration>.pt` files of a run folder, newest (highest iteration) first."""
    found = [(int(m.group(1)), p) for p in Path(run_dir).glob("model_*.pt") if (m := _CHECKPOINT.search(p.name))]
    return [p for _, p in sorted(found, reverse=True)]


def latest_checkpoint(run_dir: str | Path) -> Path | None:
    """The `model_<iteration>.pt` with the highest iteration in a run folder, or None."""
    found = checkpoints(run_dir)
    return found[0] if found else None


def latest_readable_checkpoint(run_dir: str | Path) -> tuple[Path | None, list[CheckpointError]]:
    """The newest checkpoint of a run folder that loads, and the errors of the newer ones skipped."""
    skipped = []
    for path in checkpoints(run_dir):
        try:
            load(path)
            return path, skipped
        except CheckpointError as err:
            skipped.append(err)
    return None, skipped


def remove_stale_temporaries(run_dir: str | Path) -> list[Path]:
    """Delete the temporaries of saves that never finished (a process killed mid-write); returns them.

    Call it only while no other process saves into `run_dir`.
    """
    return files.remove_stale_temporaries(run_dir, _TEMPORARY_GLOB) + files.remove_stale_temporaries(
        run_dir, _CONFIG_TEMPORARY_GLOB)


# Private functions.


def _unreadable(path: Path, err: Exception) -> CheckpointError:
    """Why `torch.load` failed on the torch.save file `path`: pickled objects, or a file cut short or corrupt."""
    if isinstance(err, pickle.UnpicklingError) and "Weights only load failed" in str(err):
        return CheckpointError(f"checkpoint {path} is not a batonlab checkpoint: it holds pickled Python objects "
                               f"(a whole model?), which a weights-only load refuses; {_LAYOUT}")
    reason = " ".join(str(err).split()).split(". ")[0]  # torch adds paragraphs of advice
    return CheckpointError(f"checkpoint {path} is unreadable (truncated or corrupt): {reason}")
