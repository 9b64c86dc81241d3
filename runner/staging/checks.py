"""Checks of a user's files against what their publisher lists: archive checksums and
item counts. A mismatch is a ``UserError``, never a warning, unless the caller asked for
an unofficial import (which then stages a non-conforming data set)."""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from runner.errors import UserError
from runner.staging import progress

_CHUNK = 1 << 22


def file_digest(path: Path, algorithm: str = "sha256", *, show: bool = False) -> str:
    """Hex digest of a file, read in chunks (archives can be several GB)."""
    h = hashlib.new(algorithm)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        if show and size > 64 << 20:
            with progress.bar(f"{algorithm} {path.name}", size, in_bytes=True) as advance:
                while chunk := fh.read(_CHUNK):
                    h.update(chunk)
                    advance(len(chunk))
        else:
            while chunk := fh.read(_CHUNK):
                h.update(chunk)
    return h.hexdigest()


@dataclass(frozen=True)
class Expected:
    """What an official source file must look like.

    ``digests`` maps a file's name to ``(algorithm, hexdigest)``; ``counts`` maps a split
    to its number of items. An empty mapping checks nothing. ``official`` says whether
    these are the publisher's numbers: only then is the staged set conforming.
    ``classes`` names the class folders a tree must hold (ImageNet's WNIDs), or None.
    """

    digests: dict[str, tuple[str, str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    official: bool = True
    classes: tuple[str, ...] | None = None


UNCHECKED = Expected(official=False)


def check_file(path: Path, expected: Expected, *, name: str | None = None, fix: str) -> str | None:
    """Check ``path`` against ``expected.digests[name]``; return the digest seen (or None)."""
    name = name or path.name
    if name not in expected.digests:
        return None
    algorithm, want = expected.digests[name]
    got = file_digest(path, algorithm, show=True)
    if got != want:
        raise UserError(
            f"{path} is not the official {name}: its {algorithm} is {got}, expected {want} "
            "(corrupted or incomplete download?)",
            fix,
        )
    return got


def check_count(split: str, got: int, expected: Expected, *, what: str, fix: str) -> None:
    want = expected.counts.get(split)
    if want is not None and got != want:
        raise UserError(f"{what} has {got:,} items in its {split} split, expected {want:,}", fix)


@contextmanager
def readable_tar(path: Path, what: str, fix: str) -> Iterator[None]:
    """Faults found while a tar is read (truncated, a member that claims more bytes than the
    file holds, a header that is not one) as one line naming ``path``: tarfile raises them
    late, in the listing or the extraction, not when the archive is opened."""
    try:
        yield
    except (tarfile.TarError, EOFError) as err:
        raise UserError(f"{path} is not a readable {what} ({err})", fix) from None
