# SPDX-License-Identifier: BSD-3-Clause
"""The one write path for what a run produces: atomic files, folders swapped in whole, unique folders.

A file is written to a temporary sibling (`.<name>.<random>.tmp`), fsynced and renamed over its
path; a folder (an export) is built as a temporary sibling and exchanged with the old one in one
rename, so a reader sees the old or the new, never a mix. A process killed mid-write leaves only
temporaries, which `remove_stale_temporaries` deletes.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR,
                         errno.EEXIST, errno.EISDIR, errno.EFBIG, errno.EIO})
"""errno values of a disk or permission fault (full, read-only, not a folder, ...): the user's to fix."""

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def disk_fault(err: BaseException) -> bool:
    """Whether `err` is an OSError of a full disk, a permission or a path that is not what it must be."""
    return isinstance(err, OSError) and err.errno in DISK_ERRNOS


def describe_disk_fault(err: OSError, path: str | Path | None = None) -> str:
    """One line naming the path and the cause, e.g. "cannot write logs/x: No space left on device"."""
    where = err.filename if err.filename is not None else path
    cause = err.strerror or str(err)
    if where is None:
        return f"cannot write: {cause}"
    if err.errno in (errno.EEXIST, errno.ENOTDIR):
        blocking = next((p for p in (Path(where), *Path(where).parents) if p.exists() and not p.is_dir()), None)
        if blocking is not None:
            return f"cannot write {where}: {blocking} is a file, not a folder"
    return f"cannot write {where}: {cause}"


def atomic_write(path: str | Path, write: Callable[[object], None], mode: str = "wb") -> Path:
    """Call `write(file)` on a temporary sibling of `path`, fsync it, then rename it over `path`.

    The file gets the mode of any new file of this process (0666 minus the umask). An OSError names
    `path`, not the temporary.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, mode) as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        raise OSError(err.errno, err.strerror, str(path)) from err
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_folder(path.parent)
    return path


def atomic_write_bytes(path: str | Path, data: bytes) -> Path:
    """`data` to `path` atomically (`atomic_write`)."""
    return atomic_write(path, lambda f: f.write(data))


def atomic_write_text(path: str | Path, text: str) -> Path:
    """`text` (UTF-8) to `path` atomically (`atomic_write`)."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def replace_folder(path: str | Path, build: Callable[[Path], T]) -> T:
    """Build a folder with `build(tmp)` beside `path`, then swap it in for `path` in one rename.

    Until the swap, `path` keeps what it held (or stays absent); after it, it holds exactly what `build`
    wrote. `build` gets the temporary folder and returns its result (paths inside `tmp` are mapped to
    `path`). A failure or a signal during `build` removes the temporary and leaves `path` as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        os.chmod(tmp, 0o777 & ~_umask())
        result = build(tmp)
        for file in tmp.rglob("*"):
            if file.is_file():
                _fsync_file(file)
        _fsync_folder(tmp)
        if path.exists():
            _exchange(tmp, path)  # tmp now holds the old folder
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            os.rename(tmp, path)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise OSError(err.errno, err.strerror, str(path)) from err
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_folder(path.parent)
    return _remap(result, tmp, path)


def create_unique_folder(path: str | Path) -> Path:
    """Create `path`, or `path_1`, `path_2`, ... if it exists (exclusive: two processes never share one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    candidate, suffix = path, 0
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            if candidate.exists() and not candidate.is_dir():
                raise
            suffix += 1
            candidate = path.with_name(f"{path.name}_{suffix}")


def remove_stale_temporaries(folder: str | Path, pattern: str = ".*.tmp") -> list[Path]:
    """Delete the temporaries in `folder` matching `pattern` that an interrupted write left; returns them.

    Call it only while no other process writes into `folder`.
    """
    stale = sorted(Path(folder).glob(pattern)) if Path(folder).is_dir() else []
    for path in stale:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    return stale


def _exchange(a: Path, b: Path) -> None:
    """Swap two paths in one step (Linux renameat2 RENAME_EXCHANGE); two renames where it is missing."""
    libc = _libc()
    renameat2 = getattr(libc, "renameat2", None) if libc is not None else None
    if renameat2 is not None:
        if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
            return
        code = ctypes.get_errno()
        if code not in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
            raise OSError(code, os.strerror(code), str(b))
    old = Path(tempfile.mkdtemp(prefix=f".{b.name}.", suffix=".tmp", dir=b.parent))
    os.rename(b, old / b.name)
    os.rename(a, b)
    os.rename(old / b.name, a)
    old.rmdir()


def _remap(result, tmp: Path, path: Path):
    if isinstance(result, Path) and result.is_relative_to(tmp):
        return path / result.relative_to(tmp)
    if isinstance(result, tuple):
        return tuple(_remap(r, tmp, path) for r in result)
    return result


_LIBC: list = []


def _libc():
    if not _LIBC:
        name = ctypes.util.find_library("c")
        _LIBC.append(ctypes.CDLL(name, use_errno=True) if name else None)
    return _LIBC[0]


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_folder(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot fsync a folder; the rename itself is still atomic
    finally:
        os.close(fd)


def _umask() -> int:
    # The umask can only be read by setting it; set it straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
