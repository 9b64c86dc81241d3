"""An entry folder is data, not a path into the host.

Everything under it must be a plain file or folder: a symbolic link (to the host's
evaluation labels, to the runner's signing key, ...), a hard link, a device, a FIFO or a
socket is refused with its name, so nothing outside the folder can reach the image or the runner.
Paths the manifest gives (the lock, the final weights) are plain relative paths that stay
inside their folder.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath

from runner.errors import UserError

SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache"}


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def plain_files(folder: Path) -> list[Path]:
    """Every file under ``folder`` (caches and VCS folders skipped), in a stable order;
    UserError naming the first link or special file found."""
    files = []
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(dirnames) + sorted(filenames):
            full = Path(dirpath) / name
            mode = full.lstat().st_mode
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                rel = full.relative_to(folder)
                raise UserError(
                    f"{rel} in entry {folder.name} is {_kind(mode)}; an entry folder holds only plain files",
                    f"replace {full} with a regular file (copy the content in) or remove it",
                )
            if full.lstat().st_nlink > 1:  # a hard link may share its inode with a host file
                raise UserError(
                    f"{full.relative_to(folder)} in entry {folder.name} is hard-linked elsewhere",
                    f"replace {full} with its own copy (cp --no-preserve=links) or remove it",
                )
            if not name.endswith(".pyc"):
                files.append(full)
    return files  # os.walk order, folders sorted: the order content keys have always used


def relative_problem(value: str) -> str | None:
    """Why ``value`` is not a plain relative path that stays inside its folder."""
    if not value or "\x00" in value or any(ord(c) < 32 for c in value):
        return "is empty or holds control characters"
    if value.startswith("/") or "\\" in value:
        return "is absolute"
    if ".." in PurePosixPath(value).parts:
        return "leaves its folder ('..')"
    return None


def inside_entry(folder: Path, value: str, field: str) -> Path:
    """``folder/value`` for a manifest field naming a file in the entry; UserError if it
    leaves the folder, is a link or is not a regular file."""
    problem = relative_problem(value)
    if problem is None:
        path = folder / value
        if path.is_symlink():
            problem = "is a symbolic link"
        elif not path.resolve().is_relative_to(folder.resolve()):
            problem = "resolves outside the entry folder"
        elif not path.is_file():
            raise UserError(f"entry {folder.name} has no {value} (field '{field}')", f"add {path}")
        else:
            return path
    raise UserError(f"entry.yaml: field '{field}' ({value[:100]!r}) {problem}",
                    f"name a file inside {folder}, relative to it")
