"""A host lock on the cores a run's profile pins, so concurrent runs on one host queue
instead of sharing cores (which would skew both their clocks).

One lock file per CPU under the runner home (``locks/cpu-<n>.lock``), taken in ascending
order (so two runs can never deadlock) with ``fcntl.flock``: the kernel releases it when
the holder exits, even on SIGKILL. Held for a run's whole training and inference.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from runner import paths
from runner.engine.containers import cpu_limits
from runner.run.contention import parse_cpuset

POLL_S = 0.5


def lock_dir() -> Path:
    return paths.home() / "locks"


def cpuset_for(cpus: float | None) -> str | None:
    """The cpuset a profile's CPU limit pins (None: no pinning, the run may use any CPU)."""
    return cpu_limits(cpus).get("cpuset_cpus")


def _span(cpus: list[int]) -> str:
    return f"{cpus[0]}-{cpus[-1]}" if len(cpus) > 1 and cpus == list(range(cpus[0], cpus[-1] + 1)) \
        else ",".join(map(str, cpus))


def holder_of(lock_file: Path) -> str:
    """Who holds a CPU lock, in words: "run X (pid N)" from the holder's note and its run marker."""
    try:
        note = json.loads(lock_file.read_text() or "{}")
    except (OSError, ValueError):
        note = {}
    pid = note.get("pid")
    run = None
    for marker in (paths.home() / "active-runs").glob("*.json"):
        try:
            info = json.loads(marker.read_text())
        except (OSError, ValueError):
            continue
        if info.get("pid") == pid:
            run = info.get("run_id")
    return f"run {run or note.get('entry') or '?'} (pid {pid if pid is not None else '?'})"


@contextmanager
def hold_cores(cpus: float | None, say: Callable[[str], None], entry: str = "") -> Iterator[list[int]]:
    """Hold every CPU the profile pins (all of the host's when it pins none) for the block."""
    wanted = parse_cpuset(cpuset_for(cpus))
    folder = lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    handles = []
    try:
        for cpu in wanted:
            path = folder / f"cpu-{cpu}.lock"
            handle = open(path, "a+")
            handles.append(handle)
            told = None
            while True:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    holder = holder_of(path)
                    if holder != told:
                        say(f"waiting for cores {_span(wanted)} held by {holder}")
                        told = holder
                    time.sleep(POLL_S)
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps({"pid": os.getpid(), "entry": entry, "since": time.time()}))
            handle.flush()
        yield wanted
    finally:
        for handle in reversed(handles):
            try:
                fcntl.flock(handle, fcntl.LOCK_UN)
            finally:
                handle.close()
