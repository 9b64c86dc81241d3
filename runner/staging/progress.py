"""Progress of the slow staging steps (hashing, parsing, decoding), through the command's
reporter: a live line on stderr on a terminal, plain lines with a heartbeat in a log (what
a command prints on stdout stays clean); nothing when the reporter is quiet."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from runner.report import reporter


@contextmanager
def bar(description: str, total: float | None, *, in_bytes: bool = False) -> Iterator:
    """A step with a known amount of work; yields ``advance(n)``."""
    with reporter().phase("stage", description) as phase:
        phase.update(done=0, total=total, in_bytes=in_bytes)
        yield phase.advance


def step(message: str):
    """A step without measurable progress (its elapsed time, and a heartbeat in a log)."""
    return reporter().phase("stage", message)


def note(message: str) -> None:
    reporter().progress.print(message, highlight=False)
