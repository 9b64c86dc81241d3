"""Start an entry's container locked down, stream its output with host timestamps,
and always remove it; remove what killed runners left behind. Any engine: this module
drives ``runner.engine.interface.Engine``'s operations, never an engine's own API.

The lock-down is the run contract's (``interface.LOCKED_DOWN``): no network, a non-root
user, every capability dropped, no-new-privileges, a read-only root with tmpfs scratch,
CPU/memory limits and the profile's GPUs. Timestamps are the host's monotonic clock, taken
as each line arrives.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, TextIO

from runner.engine import labels as ownership
from runner.engine.interface import (
    CONTAINER_USER,
    PIDS_LIMIT,
    SHM_SIZE,
    TMPFS,
    Conflict,
    Container,
    ContainerSpec,
    Engine,
    EngineError,
    Mount,
    NotFound,
)
from runner.engine.labels import MANAGED_LABEL, owned_labels

__all__ = ["CONTAINER_USER", "MANAGED_LABEL", "PIDS_LIMIT", "SHM_SIZE", "TMPFS", "ContainerOutcome", "ContainerSpec",
           "Mount", "cpu_limits", "owned_labels", "prepare_writable", "remove_orphans", "run_container"]

# The longest output line kept whole; longer lines are cut (and say so) in log and events.
MAX_LINE_BYTES = 1 << 20


@dataclass
class ContainerOutcome:
    exit_code: int | None
    timed_out: bool
    interrupted: bool
    wall_seconds: float
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.interrupted) and self.error is None

    def reason(self) -> str | None:
        """Why the run is incomplete, in words for result.json; None when it ended well."""
        if self.interrupted:
            return "interrupted"
        if self.timed_out:
            return f"timed out after {self.wall_seconds:.0f} s"
        if self.error:
            return self.error
        if self.exit_code:
            return f"container exited with code {self.exit_code}"
        return None


def prepare_writable(path: Path) -> None:
    """Create a host folder the container's unprivileged user can write to."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        uid, gid = (int(x) for x in CONTAINER_USER.split(":"))
        os.chown(path, uid, gid)


def cpu_limits(cpus: float | None) -> dict:
    """Whole cores are given as a cpuset: pinned cores have no CFS quota to hit, and a
    quota throttles multi-threaded math libraries in bursts that skew timing. Fractions
    of a core can only be a quota."""
    if not cpus:
        return {}
    host = os.cpu_count() or 1
    if float(cpus).is_integer() and cpus <= host:
        return {"cpuset_cpus": f"0-{int(cpus) - 1}"}
    return {"nano_cpus": int(cpus * 1e9)}


def remove_orphans(engine: Engine) -> int:
    """Remove containers of earlier runs whose runner was killed before it could clean up.

    Only containers this host can prove orphaned: labelled by a runner on this host whose
    process is gone (or whose pid now belongs to another process). Containers of live runs,
    of other hosts sharing the engine, or without owner labels are never touched."""
    removed = 0
    # Newest first: a rank that joined rank 0's network namespace goes before rank 0.
    for c in sorted(engine.owned(), key=lambda c: c.created, reverse=True):
        owner = ownership.owner_from_labels(c.labels)
        if owner is None or not owner.gone():
            continue
        try:
            c.remove()
            removed += 1
        except (NotFound, Conflict):  # gone, or being removed by someone else
            pass
    return removed


class _OutputPump:
    """Reads a container's output stream (in the reader thread) into lines: each is stamped
    with ``clock()`` as its chunk arrives, written to the log and handed to ``on_line``.

    Linear in the output's size: each chunk is split once, and a partial line is kept only up
    to MAX_LINE_BYTES (the rest of an over-long line is counted, not kept). ``failures``
    holds what went wrong, for the main thread to report: the first consumer's error (a
    consumer's bug must not stop the reading) and any error of the stream itself."""

    def __init__(self, on_line: Callable[[str, float], None], clock: Callable[[], float]):
        self.on_line = on_line
        self.clock = clock
        self.failures: list[BaseException] = []
        self._partial = bytearray()
        self._dropped = 0  # bytes cut from the current over-long line

    def run(self, stream: Iterable[bytes], log_path: Path) -> None:
        """Read ``stream`` to its end, appending every line to ``log_path``."""
        try:
            with open(log_path, "a", buffering=1) as log:
                for chunk in stream:
                    self._feed(chunk, self.clock(), log)
                if self._partial or self._dropped:  # the last line had no newline
                    self._emit(log, self.clock())
        except BaseException as exc:  # surfaced in the main thread
            self.failures.append(exc)

    def _feed(self, chunk: bytes, now: float, log: TextIO) -> None:
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            self._keep(chunk[start:end])
            self._emit(log, now)
            start = end + 1
        self._keep(chunk[start:])

    def _keep(self, piece: bytes) -> None:
        """Add ``piece`` to the current line, up to MAX_LINE_BYTES; count the rest."""
        room = MAX_LINE_BYTES - len(self._partial)
        self._dropped += max(0, len(piece) - room)
        self._partial += piece[:room]

    def _emit(self, log: TextIO, now: float) -> None:
        line = bytes(self._partial).decode("utf-8", "replace").rstrip("\r")
        if self._dropped:
            line += f" [... {self._dropped} more bytes cut by the runner]"
        self._partial.clear()
        self._dropped = 0
        log.write(f"[{now:10.3f}] {line}\n")
        try:
            self.on_line(line, now)
        except Exception as exc:  # a consumer's bug must not stop the reading,
            if not self.failures:  # but the outcome says so (first failure only)
                self.failures.append(exc)


def _follow(reader: threading.Thread, deadline: float, cancel: threading.Event | None,
            outcome: ContainerOutcome) -> None:
    """Wait while the output flows: until it ends, ``cancel`` is set (interrupted) or the
    host's clock passes ``deadline`` (timed out)."""
    while reader.is_alive():
        reader.join(timeout=0.2)
        if cancel is not None and cancel.is_set():
            outcome.interrupted = True
            return
        if time.monotonic() > deadline:
            outcome.timed_out = True
            return


def _remove(container: Container, outcome: ContainerOutcome,
            before_remove: Callable[[bool], None] | None) -> None:
    """Remove the stopped container, after ``before_remove(ended)``; a failed removal is the
    outcome's error unless it has one already (one already gone is no error)."""
    try:
        if before_remove is not None:
            before_remove(not (outcome.timed_out or outcome.interrupted) and outcome.error is None)
        container.remove()
    except NotFound:
        pass
    except EngineError as exc:  # e.g. a removal already in progress
        outcome.error = outcome.error or f"engine error while removing the container: {exc}"


def run_container(
    engine: Engine,
    spec: ContainerSpec,
    on_line: Callable[[str, float], None],
    log_path: Path,
    *,
    on_started: Callable[[Container, Callable[[], float]], None] | None = None,
    cancel: threading.Event | None = None,
    before_remove: Callable[[bool], None] | None = None,
    before_start: Callable[[], None] | None = None,
) -> ContainerOutcome:
    """Run ``spec`` to its end, calling ``on_line(line, t)`` for every output line, where
    ``t`` is host monotonic seconds since just before the container started.

    ``on_started(container, clock)`` is called once the container runs, before any line
    is read; ``clock()`` gives the time on the same scale as ``t``. Setting ``cancel``
    stops and removes the container (recorded as interrupted). ``before_remove(ended)`` is
    called once the container has stopped, before it is removed (``ended``: it ran to its
    end, not timed out or interrupted): containers that share its network namespace must
    be gone first, since an engine may refuse to remove a namespace still in use.
    ``before_start()`` is called once the container is created and attached, before it
    starts: what must come first (the evaluator's own start) overlaps this one's creation."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    container = engine.create(spec)
    stream = engine.attach(container)
    t0 = time.monotonic()

    def clock() -> float:
        return time.monotonic() - t0

    pump = _OutputPump(on_line, clock)
    reader = threading.Thread(target=pump.run, args=(stream, log_path), name=f"runner-{spec.label}-output",
                              daemon=True)
    outcome = ContainerOutcome(exit_code=None, timed_out=False, interrupted=False, wall_seconds=0.0)
    try:
        if before_start is not None:
            before_start()
        t0 = time.monotonic()
        container.start()
        if on_started is not None:
            on_started(container, clock)
        reader.start()
        _follow(reader, t0 + spec.timeout_s, cancel, outcome)
        if not (outcome.timed_out or outcome.interrupted):  # a cancelled container is removed at once below
            outcome.exit_code = engine.wait(container, timeout=60)
    except KeyboardInterrupt:
        outcome.interrupted = True
    except EngineError as exc:
        outcome.error = f"engine error: {exc}"
    finally:
        outcome.wall_seconds = clock()
        _remove(container, outcome, before_remove)
        if reader.ident is not None:  # not started when the start (or before_start) failed
            reader.join(timeout=5)
    if pump.failures and outcome.error is None:
        outcome.error = f"output stream failed: {pump.failures[0]}"
    return outcome
