"""Progress bars for the slow steps (hashing, parsing, decoding), drawn on stderr so
that what a command prints on stdout stays clean."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeRemainingColumn,
)

_console = Console(stderr=True)


@contextmanager
def bar(description: str, total: float | None, *, in_bytes: bool = False) -> Iterator:
    """A one-task progress bar; yields ``advance(n)``."""
    count = DownloadColumn() if in_bytes else MofNCompleteColumn()
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        count,
        TimeRemainingColumn(),
        console=_console,
        transient=True,
    ) as progress:
        task = progress.add_task(description, total=total)
        yield lambda n=1: progress.advance(task, n)


def step(message: str):
    """A spinner while a step without measurable progress runs."""
    return _console.status(message)


def note(message: str) -> None:
    _console.print(message, highlight=False)
