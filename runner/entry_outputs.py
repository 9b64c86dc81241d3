"""Opening a file the entry wrote (under /output) without trusting it.

The entry chooses what a name is: a FIFO blocks ``open`` until someone writes to it (the
runner would wait forever, holding its core locks), a device or socket is not data, and a
sparse file claims any size without using a block of disk. So the type and the apparent
size (``st_size``, what a reader would have to read) are checked on the name first,
without following a link; the file is then opened non-blocking and without following a
link, and checked again on the open descriptor (the same inode, still a regular file,
still under the limit), so a name swapped in between is refused too.

It imports nothing of the runner: the run (checkpoints, the evaluator's copies), the
scorer (weights dumps) and the bundle (the result folder's file list) all read such files.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

from runner.errors import RunnerError

_KINDS = (
    (stat.S_ISLNK, "symbolic link"),
    (stat.S_ISDIR, "folder"),
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISSOCK, "socket"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
)


class UnsafeEntryFile(RunnerError):
    """A file the entry wrote that the runner will not read; the message says why."""

    default_fix = "have the entry write a regular file, within the limit named, where the runner reads it"


def kind_of(mode: int) -> str:
    """What a file is, in words (``regular file`` for data)."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "regular file" if stat.S_ISREG(mode) else "special file"


def open_regular(path: Path, limit: int, what: str, limit_name: str = "") -> tuple[BinaryIO, int]:
    """``(open file, size)`` for ``path`` when it is a regular file of at most ``limit``
    bytes (apparent size); ``UnsafeEntryFile`` naming ``what`` (and the limit's
    ``limit_name``) otherwise. Never blocks."""
    try:
        before = os.lstat(path)
    except OSError as exc:
        raise UnsafeEntryFile(f"{what} cannot be read: {exc.strerror}") from None
    _check(before, limit, what, limit_name)
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise UnsafeEntryFile(f"{what} cannot be read: {exc.strerror}") from None
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
            raise UnsafeEntryFile(f"{what} was replaced while the runner opened it")
        _check(now, limit, what, limit_name)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), now.st_size
    except BaseException:
        os.close(fd)
        raise


def _check(st: os.stat_result, limit: int, what: str, limit_name: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeEntryFile(f"{what} is a {kind_of(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        named = f" ({limit_name})" if limit_name else ""
        raise UnsafeEntryFile(f"{what} is {st.st_size} bytes (its apparent size), over the {limit}-byte limit{named}")


def copy_limited(src: BinaryIO, size: int, target: Path, update) -> None:
    """Copy at most ``size`` bytes of ``src`` to a new ``target``, feeding ``update`` (a
    digest's) with each chunk: a file that grows while it is read is not read past its size."""
    left = size
    with open(target, "wb") as dst:
        while left > 0 and (chunk := src.read(min(1 << 20, left))):
            left -= len(chunk)
            update(chunk)
            dst.write(chunk)
