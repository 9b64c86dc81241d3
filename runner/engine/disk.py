"""Refuse to start work that would fill the disk half-way through."""

from __future__ import annotations

import shutil
from pathlib import Path

from runner.errors import UserError


def free_bytes(path: Path) -> int:
    path = Path(path)
    while not path.exists() and path != path.parent:  # a folder not created yet
        path = path.parent
    return shutil.disk_usage(path).free


def require_free_space(path: Path, minimum: int, what: str) -> None:
    free = free_bytes(path)
    if free < minimum:
        raise UserError(
            f"only {free / 1024**3:.1f} GiB free on the disk holding {path}; "
            f"{what} needs at least {minimum / 1024**3:.1f} GiB",
            "free disk space (e.g. `docker system prune`, or wipe ~/.cache/runner/wheelhouse)",
        )
