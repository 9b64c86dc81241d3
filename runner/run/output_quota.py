"""A quota on the entry's output folder: a watcher thread measures it every second and,
once it exceeds the limit, calls ``on_exceeded`` (which stops the run) exactly once; a
last measurement when the watch stops catches what was written after the last tick.

Files count at their apparent size (``st_size``), not the disk blocks they use: a sparse
file of 100 GiB uses no block, but whoever reads it (the runner hashing it for the bundle,
an auditor) reads 100 GiB.

Without it an entry can fill the host's disk, or make the runner sign a bundle its own
``verify`` then refuses as too large.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Callable

DEFAULT_QUOTA_GIB = 2.0


def quota_bytes() -> int:
    """The quota setting (``RUNNER_OUTPUT_QUOTA_GIB``, default 2 GiB), in bytes."""
    return int(float(os.environ.get("RUNNER_OUTPUT_QUOTA_GIB", DEFAULT_QUOTA_GIB)) * (1 << 30))


CHECK_EVERY_S = 1.0


def folder_size(root: Path, stop_after: int | None = None) -> int:
    """Bytes of the regular files under ``root`` (links not followed); stops counting
    once past ``stop_after``, so a folder of millions of files costs no more than needed."""
    total = 0
    stack = [root]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    total += entry.stat(follow_symlinks=False).st_size  # sparse files count in full
            except OSError:
                continue
            if stop_after is not None and total > stop_after:
                return total
    return total


class OutputQuota:
    """Watch ``folder``; ``exceeded`` holds the reason once the limit was passed."""

    def __init__(self, folder: Path, on_exceeded: Callable[[], None],
                 limit_bytes: int | None = None, every_s: float = CHECK_EVERY_S):
        self.folder, self.on_exceeded = folder, on_exceeded
        self.limit = quota_bytes() if limit_bytes is None else limit_bytes
        self.every_s = every_s
        self.exceeded: str | None = None
        self.error: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="runner-output-quota", daemon=True)

    def start(self) -> OutputQuota:
        self._thread.start()
        return self

    def check(self, last: bool = False) -> bool:
        """One measurement; True (and the callback called) when over the quota."""
        size = folder_size(self.folder, stop_after=self.limit)
        if size > self.limit and self.exceeded is None:
            self.exceeded = (f"the entry's output folder exceeded its quota of "
                             f"{self.limit / (1 << 30):g} GiB (RUNNER_OUTPUT_QUOTA_GIB) with {size} bytes "
                             + ("(apparent sizes, sparse files in full) when the run ended" if last
                                else "(apparent sizes, sparse files in full); the run was stopped"))
            self.on_exceeded()
        return self.exceeded is not None

    def _watch(self) -> None:
        while not self._stop.wait(self.every_s):
            try:
                if self.check():
                    return
            except Exception as exc:  # never fatal to the run; stop() reports it
                self.error = f"{type(exc).__name__}: {exc}"
                return

    def stop(self) -> str | None:
        """Stop watching; one last measurement (an entry may write its last bytes, or a
        sparse file of any size, between two ticks and exit). The exceeded reason or None."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        if self.exceeded is None and self.error is None:
            try:
                self.check(last=True)
            except Exception as exc:  # never fatal to the run
                self.error = f"{type(exc).__name__}: {exc}"
        return self.exceeded
