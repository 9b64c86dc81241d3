"""The one file hash the toolkit uses for identities (wheels, bundle files, staged data).

The file is streamed through ``runner.safe_read`` (a regular file only, opened without
blocking, never a link at its last component), so a FIFO or a device where a result's file
should be is one line (``UnreadableFile``: a ``safe_read.Unreadable`` and an ``OSError``), not a hang, and a file of any size is
digested in chunks of 1 MiB, never held.
"""

from __future__ import annotations

import hashlib
import os
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


def folder_stamp(folder: Path) -> str:
    """sha256 over what the file system says of every entry under ``folder`` (path, kind, size,
    modification and change times, inode, device), read without opening a file: any write,
    rename, copy or replacement changes it (the change time cannot be set back), so a folder
    with the stamp it had when its verdict was made holds the same bytes."""
    digest = hashlib.sha256()
    pending = [(str(folder), "")]
    while pending:
        here, rel = pending.pop()
        try:
            with os.scandir(here) as found:
                entries = sorted(found, key=lambda e: e.name)
        except OSError as err:
            digest.update(f"{rel}\0unreadable {err.errno}\n".encode())
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as err:
                digest.update(f"{rel}/{entry.name}\0gone {err.errno}\n".encode(errors="surrogateescape"))
                continue
            line = (f"{rel}/{entry.name}\0{st.st_mode} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} "
                    f"{st.st_ino} {st.st_dev}\n")
            digest.update(line.encode(errors="surrogateescape"))
            if entry.is_dir(follow_symlinks=False):
                pending.append((entry.path, f"{rel}/{entry.name}"))
    return digest.hexdigest()
