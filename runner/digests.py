"""The one file hash the toolkit uses for identities (wheels, bundle files, staged data).

The file is streamed through ``runner.safe_read`` (a regular file only, opened without
blocking, never a link at its last component), so a FIFO or a device where a result's file
should be is one line (``UnreadableFile``: a ``safe_read.Unreadable`` and an ``OSError``), not a hang, and a file of any size is
digested in chunks of 1 MiB, never held.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from runner import safe_read


class UnreadableFile(safe_read.Unreadable, OSError):
    """A file ``sha256_file`` will not read: one line for the user (a ``UserError``), and an
    ``OSError`` to the callers that treat a missing file as gone."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        for chunk in safe_read.iter_chunks(path, "data"):
            digest.update(chunk)
    except safe_read.Unreadable as exc:
        raise UnreadableFile(exc.path, exc.why, exc.fix) from None
    return digest.hexdigest()
