"""Refuse to start work that would fill the disk half-way through, and, when a disk fills
anyway, say which one (the runner's own, not the engine's) and how to free it."""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from runner import paths
from runner.errors import UserError

# How writers say a disk is full: the errno, or numpy's message (its OSError has no errno).
_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_FULL_TEXTS = ("No space left on device", "Not enough free space", "Disk quota exceeded")


def _existing(path: Path) -> Path:
    path = Path(path)
    while not path.exists() and path != path.parent:  # a folder not created yet
        path = path.parent
    return path


def free_bytes(path: Path) -> int:
    return shutil.disk_usage(_existing(path)).free


def mount_point(path: Path) -> Path:
    """The mount point of the file system holding ``path``."""
    path = _existing(Path(os.path.abspath(path)))
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def out_of_space(err: BaseException) -> bool:
    """Whether ``err`` says a disk (or a quota on it) is full."""
    if not isinstance(err, OSError):
        return False
    return err.errno in _FULL_ERRNOS or any(text in str(err) for text in _FULL_TEXTS)


def _size(n: int) -> str:
    return f"{n / 1024**3:.1f} GiB" if n >= 1024**3 else f"{n / 1024**2:.1f} MiB"


def disk_full(path: Path, doing: str, err: BaseException | None = None) -> UserError:
    """The error for a full disk under ``path``: which disk, how full, and how to free it."""
    where = mount_point(path)
    usage = shutil.disk_usage(_existing(path))
    detail = f" ({' '.join(str(err).split())[:200]})" if err is not None else ""
    home = paths.home()
    inside_home = Path(os.path.abspath(path)).is_relative_to(os.path.abspath(home))
    return UserError(
        f"the disk holding {path} (mounted at {where}) is full: {doing} could not write there{detail}; "
        f"{_size(usage.free)} free of {_size(usage.total)}",
        f"free space on {where}"
        + (f" (the runner home {home}: e.g. wipe {home / 'wheelhouse'} or old {home / 'data'} sets)" if inside_home
           else "")
        + ", or set RUNNER_HOME (RUNNER_RESULTS for results) to a folder on a larger disk, then retry",
    )


def require_free_space(path: Path, minimum: int, what: str) -> None:
    free = free_bytes(path)
    if free < minimum:
        raise UserError(
            f"only {free / 1024**3:.1f} GiB free on the disk holding {path}; "
            f"{what} needs at least {minimum / 1024**3:.1f} GiB",
            "free disk space (e.g. `docker system prune`, or wipe ~/.cache/runner/wheelhouse)",
        )
