"""How the runner tells its user what it is doing: one reporter per command, not a console
handed down through every call.

The command line sets the reporter up (``reporting(Reporter(...))``); the stages below it
say what they do through ``reporter()``: a line (``say``), a warning (``warn``; ``warn_once``
for one that every run of a ``--runs N`` would repeat), a spinner while something slow runs
(``status``). Benchmarks and studies that run reproductions
quietly install a reporter that prints nothing. Tables and records render themselves in
the command line; the reporter is for progress, never for results.
"""

from __future__ import annotations

import os
from contextlib import contextmanager, nullcontext
from typing import Iterator

from rich.console import Console


class Reporter:
    def __init__(self, console: Console | None = None, quiet: bool = False):
        self.quiet = quiet
        self.console = console or (Console(file=open(os.devnull, "w")) if quiet else Console())
        self._warned: set[str] = set()

    def say(self, markup: str, **options) -> None:
        """One line of progress (rich markup)."""
        self.console.print(markup, **options)

    def warn(self, text: str) -> None:
        self.console.print(f"[yellow]{text}[/]")

    def warn_once(self, markup: str) -> None:
        """A warning that would be the same for every run of a command (a setting not made):
        said once per reporter, that is once per command, however many runs it makes."""
        if markup not in self._warned:
            self._warned.add(markup)
            self.console.print(markup, highlight=False)

    def status(self, text: str):
        """A spinner while something slow runs (nothing when quiet)."""
        return nullcontext() if self.quiet else self.console.status(text)

    # What code that still expects a console may be given (``print`` and ``status``).
    def print(self, *objects, **options) -> None:
        self.console.print(*objects, **options)


_current = Reporter()


def reporter() -> Reporter:
    """The command's reporter (a plain one when no command set one up: library use)."""
    return _current


@contextmanager
def reporting(to: Reporter) -> Iterator[Reporter]:
    """Report through ``to`` inside the block (a command, or a quiet reproduction)."""
    global _current
    previous, _current = _current, to
    try:
        yield to
    finally:
        _current = previous


def quietly():
    """Report nothing inside the block (a benchmark's or a study's own reproductions)."""
    return reporting(Reporter(quiet=True))
