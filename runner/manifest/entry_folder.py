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
from runner.safe_read import visible

SKIP_DIRS = {"__pycache__", ".git", ".pytest_cache", ".mypy_cache"}
# The most bytes one entry file may hold (its apparent size, read before the file is): an
# entry carries its code and recipe, and a file this large counts whole against an
# information budget of a few tens of KiB (``runner.entry_build.information``), so it could
# never fit; refusing it by its size keeps a sparse file of gigabytes from being read,
# digested, copied into a build context or sent to the engine.
ENTRY_FILE_MAX_BYTES = 16 << 20


def shown_name(name: str) -> str:
    """A file name as it can be printed: bytes that are not UTF-8 written as ``\\xe9``,
    control characters made visible."""
    return visible(os.fsencode(name).decode("utf-8", "backslashreplace"))


def _not_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


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
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False, onerror=_walk_error):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        here = Path(dirpath)
        for name in sorted(dirnames) + sorted(filenames):
            joined = os.path.join(dirpath, name)
            if _not_utf8(name):
                raise UserError(
                    f"an entry file's name is not UTF-8: {shown_name(os.path.relpath(joined, folder))} "
                    f"in entry {shown_name(folder.name)}",
                    "rename it (entry files are named in UTF-8: the build context, the image and the "
                    "result all name them)",
                )
            try:
                st = os.lstat(joined)
            except OSError as exc:
                raise UserError(f"{shown_name(joined)} cannot be read ({exc.strerror or exc})",
                                "check that the entry folder is yours and readable") from None
            mode = st.st_mode
            if stat.S_ISDIR(mode):
                continue
            full = here / name
            if not stat.S_ISREG(mode):
                rel = shown_name(str(full.relative_to(folder)))
                raise UserError(
                    f"{rel} in entry {shown_name(folder.name)} is {_kind(mode)}; an entry folder holds only plain files",
                    f"replace {shown_name(str(full))} with a regular file (copy the content in) or remove it",
                )
            if st.st_size > ENTRY_FILE_MAX_BYTES:
                raise UserError(
                    f"{shown_name(str(full.relative_to(folder)))} in entry {shown_name(folder.name)} is "
                    f"{st.st_size / (1 << 20):,.1f} MiB (its apparent size); an entry file may hold at most "
                    f"{ENTRY_FILE_MAX_BYTES >> 20} MiB, and one this large could never fit the information budget",
                    f"remove {shown_name(str(full))} from the entry folder (data belongs to the task, not the entry)",
                )
            if st.st_nlink > 1:  # a hard link may share its inode with a host file
                raise UserError(
                    f"{shown_name(str(full.relative_to(folder)))} in entry {shown_name(folder.name)} is hard-linked elsewhere",
                    f"replace {shown_name(str(full))} with its own copy (cp --no-preserve=links) or remove it",
                )
            if not name.endswith(".pyc"):
                files.append(full)
    return files  # os.walk order, folders sorted: the order content keys have always used


def _walk_error(exc: OSError) -> None:
    if isinstance(exc, FileNotFoundError):
        return  # a folder that is not there holds no file (as it always has)
    raise UserError(f"{shown_name(str(exc.filename))} cannot be read ({exc.strerror or exc})",
                    "check that the entry folder is yours and readable") from None


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
