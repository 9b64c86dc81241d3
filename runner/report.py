"""How the runner tells its user what it is doing: one reporter per command, not a console
handed down through every call.

The command line sets the reporter up (``reporting(Reporter(...))``); the stages below it
say what they do through ``reporter()``: a line (``say``), a warning (``warn``; ``warn_once``
for one that every run of a ``--runs N`` would repeat), a spinner while something slow runs
(``status``), and the progress of a long phase (``phase``): a live line on a terminal; where
the output is not a terminal (CI, ``| tee``, a Slurm log) one plain line at each step and a
heartbeat at least every ``PROGRESS_EVERY_S`` seconds, so a log shows life while a phase
that prints nothing runs. Benchmarks and studies that run reproductions quietly install a
reporter that prints nothing. Tables and records render themselves in the command line;
the reporter is for progress, never for results: a phase draws on stderr, so what a
command prints on stdout (``--json``) stays parseable.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager, nullcontext
from typing import Callable, Iterator

from rich.console import Console
from rich.live import Live
from rich.text import Text

# The longest a log that is not a terminal goes without a progress line during a phase.
PROGRESS_EVERY_S = 30.0
PROGRESS_EVERY_ENV = "RUNNER_PROGRESS_EVERY_S"  # tests set it short


def progress_every_s() -> float:
    """The heartbeat interval: ``PROGRESS_EVERY_S`` unless the environment sets another."""
    try:
        value = float(os.environ.get(PROGRESS_EVERY_ENV, PROGRESS_EVERY_S))
    except ValueError:
        return PROGRESS_EVERY_S
    return value if value > 0 else PROGRESS_EVERY_S


def duration(seconds: float) -> str:
    """``7 s``, ``1:05``, ``1:02:03``: short enough for one 80-column line."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _amount(n: float, in_bytes: bool) -> str:
    if not in_bytes:
        return f"{n:,.0f}"
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1000
    return f"{n:,.1f} GB"  # pragma: no cover (the loop returns)


class Phase:
    """A long phase's progress: what it does now (``update``), drawn as a live line on a
    terminal; otherwise one plain line at each step (``update(..., step=True)``) and the
    current state again whenever ``every_s`` passed without a line (a heartbeat thread:
    pip unpacking torch says nothing for tens of seconds, and neither does a training
    epoch). ``render``, when given, draws the whole line (the training's own); ``keep`` leaves
    the last state on the screen (in a log: a last line) when the phase ends.

    Phases nest (the clock's "image check or build" holds the build's own): ``stack`` is the
    reporter's open phases, and only the innermost speaks, on the outermost's live display
    (a terminal has one) or as the heartbeat's line (a log)."""

    def __init__(self, console: Console, name: str, text: str = "", *, every_s: float | None = None,
                 render: Callable[[], Text] | None = None, keep: bool = False, stack: list[Phase] | None = None,
                 heartbeat: Heartbeat | None = None):
        self.console = console
        self.name = name
        self.text = text
        self.done: float | None = None
        self.total: float | None = None
        self.in_bytes = False
        self.files: int | None = None  # files read, beside ``done`` bytes (``read``)
        self.started = time.monotonic()
        self.every_s = every_s if every_s is not None else progress_every_s()
        self._render = render
        self._keep = keep
        self._stack = stack if stack is not None else []
        self._lock = threading.Lock()
        self._last_line = 0.0
        self._heartbeat = heartbeat
        self._plain = False  # in a log: lines, not a live display
        self._live: Live | None = None

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def __rich__(self) -> Text:
        """``build: step 4/9, installing 17 packages (torch, ...), 1:05 elapsed``."""
        if self._render is not None:
            return self._render()
        parts = [self.text] if self.text else []
        if self.done is not None:
            count = _amount(self.done, self.in_bytes)
            parts.append(f"{count} of {_amount(self.total, self.in_bytes)} ({self.done / self.total:.0%})"
                         if self.total else count)
        if self.files is not None:
            parts.append(f"{self.files:,} files")
        parts.append(f"{duration(self.elapsed())} elapsed")
        return Text.assemble((f"{self.name}: ", "bold"), ", ".join(parts))

    def update(self, text: str | None = None, *, done: float | None = None, total: float | None = None,
               in_bytes: bool | None = None, step: bool = False) -> None:
        """The phase's state now; ``step`` says a new step began (a plain line at once)."""
        with self._lock:
            if text is not None:
                self.text = text
            if done is not None:
                self.done = done
            if total is not None:
                self.total = total
            if in_bytes is not None:
                self.in_bytes = in_bytes
        if step and self._plain:  # a log: the step gets its line (a terminal redraws)
            self._line()

    def advance(self, n: float = 1) -> None:
        with self._lock:
            self.done = (self.done or 0) + n

    def read(self, size: int) -> None:
        """One more file of ``size`` bytes read (an image's export, a staged tree)."""
        with self._lock:
            self.files = (self.files or 0) + 1
            self.done = (self.done or 0) + size
            self.in_bytes = True

    def _line(self) -> None:
        with self._lock:
            line = self.__rich__()
            self._last_line = time.monotonic()
        self.console.print(line, highlight=False, soft_wrap=True)

    def beat(self, ahead: float = 0.0) -> None:
        """The heartbeat: the state again when nothing was printed for ``every_s``, or would
        not be by the watcher's next look, ``ahead`` seconds on (so no gap passes ``every_s``)."""
        if time.monotonic() - self._last_line + ahead >= self.every_s:
            self._line()

    def _innermost(self) -> Text:
        """What the live display draws: the innermost open phase."""
        return (self._stack[-1] if self._stack else self).__rich__()

    def __enter__(self) -> Phase:
        outermost = not self._stack
        self._stack.append(self)
        if not self.console.is_terminal:
            self._plain = True
            self._line()
            if self._heartbeat is not None:
                self._heartbeat.watch(self._stack)
        elif outermost:
            self._live = Live(get_renderable=self._innermost, console=self.console, refresh_per_second=4,
                              transient=not self._keep)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self in self._stack:
            self._stack.remove(self)
        if self._live is not None:
            self._live.__exit__(*exc)
        elif self._keep:  # a log's last line, or nested on a terminal: above the live line
            self._line()


class Heartbeat:
    """One thread per reporter, started with its first phase in a log: whenever the innermost
    open phase has printed nothing for its interval, it prints the phase's state again. (A
    thread per phase would cost each short phase a start and a join.)"""

    def __init__(self):
        self._stack: list[Phase] = []
        self._thread: threading.Thread | None = None

    def watch(self, stack: list[Phase]) -> None:
        self._stack = stack
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="progress heartbeat", daemon=True)
            self._thread.start()

    def _beat(self) -> None:
        while True:
            phase = self._stack[-1] if self._stack else None
            poll = min(1.0, phase.every_s / 4) if phase else 0.25
            time.sleep(poll)
            if phase is not None and phase in self._stack[-1:]:  # still the innermost
                phase.beat(ahead=poll)


class _Silent(Phase):
    """A quiet reporter's phase: it keeps the state and prints nothing."""

    def update(self, text=None, *, done=None, total=None, in_bytes=None, step=False) -> None:
        super().update(text, done=done, total=total, in_bytes=in_bytes)

    def __enter__(self) -> Phase:
        return self

    def __exit__(self, *exc) -> None:
        return None


class Reporter:
    def __init__(self, console: Console | None = None, quiet: bool = False, progress: Console | None = None):
        self.quiet = quiet
        self.console = console or (Console(file=open(os.devnull, "w")) if quiet else Console())
        # Progress goes where the command's own lines go: stdout, so that `runner reproduce ... | cat`
        # (a CI log) has it and stderr holds only an error's one line; a command printing JSON on
        # stdout gives its reporter stderr (``--json``).
        self.progress = progress or self.console
        self._warned: set[str] = set()
        self._phases: list[Phase] = []  # open phases, outermost first
        self._heartbeat = Heartbeat()

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

    def phase(self, name: str, text: str = "", *, render: Callable[[], Text] | None = None,
              keep: bool = False, console: Console | None = None) -> Phase:
        """A long phase's progress (``with reporter().phase("build", "step 1/9") as p:``) on
        the progress stream (or ``console``); nothing is printed when quiet."""
        if self.quiet:
            return _Silent(self.progress, name, text, render=render)
        return Phase(console or self.progress, name, text, render=render, keep=keep, stack=self._phases,
                     heartbeat=self._heartbeat)

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
