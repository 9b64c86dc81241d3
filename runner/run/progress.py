"""Live progress of a training run: the epoch, the time so far, an estimate of the rest, and
the checkpoints kept for scoring.

Checkpoints are scored after the container exits (``training.py``), so while the entry trains
the line says so instead of showing a score; once it has exited the line counts the scored
checkpoints and shows the last score against the threshold.

The estimate comes from the entry's events: its epochs' start times in this run give the time
an epoch takes; the number of epochs comes from MLPerf's ``epoch_count`` when the entry logs
it, else from the entry's newest earlier run of the same kind (smoke or not) under the
results folder, whose events say how many epochs it ran and when its container exited
(``earlier_run``). Without either there is no estimate, only the timeout.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.text import Text

from runner.events import ENTRY, RUNNER, read_events
from runner.report import duration as _duration
from runner.report import reporter
from runner.results.layout import entry_runs
from runner.score.tta import CONTAINER_EXIT
from runner.tasks import Task

EPOCH_COUNT = "epoch_count"  # MLPerf's key for the epochs a run will train (mllog constants)


@dataclass(frozen=True)
class Expected:
    """What an earlier run of the entry says this one will take."""

    epochs: int | None  # epochs it ran (the highest epoch_start's epoch_num)
    exit_seconds: float | None  # when its container exited, on its own clock
    run_id: str


def earlier_run(results: Path, entry: str, smoke: bool) -> Expected | None:
    """The newest complete run of ``entry`` of the same kind, as its events tell it; None when
    there is none (or none that can be read)."""
    import json  # lazy: start-up (only when looking for an earlier run)

    for folder in reversed(entry_runs(results, entry)):
        try:
            result = json.loads((folder / "result.json").read_text())
            if result.get("status") != "complete" or bool(result.get("smoke")) != smoke:
                continue
            events = read_events(folder / "events.jsonl")
        except (OSError, ValueError, TypeError, AttributeError):
            continue
        epochs = [e.metadata.get("epoch_num") for e in events if e.origin == ENTRY and e.key == "epoch_start"]
        counts = [n for n in epochs if isinstance(n, int) and not isinstance(n, bool)]
        exit_t = next((e.t for e in events if e.origin == RUNNER and e.key == CONTAINER_EXIT), None)
        if counts or exit_t is not None:
            return Expected(max(counts) if counts else None, exit_t, folder.name)
    return None


class TrainingProgress:
    def __init__(self, task: Task, label: str, console: Console | None = None,
                 expected: Expected | None = None, timeout_s: float | None = None):
        self.task = task
        self.label = label
        self.console = console  # None: the reporter's progress stream
        self.expected = expected
        self.timeout_s = timeout_s
        self.epoch: int | None = None
        self.epochs: int | None = None  # the entry's own epoch_count, when it logs one
        self.epoch_starts: list[float] = []  # when each epoch started, on the run's clock
        self.elapsed = 0.0
        self._elapsed_at = time.monotonic()  # when ``elapsed`` was read: the line keeps ticking
        self.requests = 0  # checkpoints copied for scoring
        self.exited_at: float | None = None  # the container's exit, on the run's clock
        self.scored = 0
        self.last_score: float | None = None
        # A live line on a terminal; in a log, a line at each epoch and a heartbeat between.
        self._phase = reporter().phase(label, render=self.__rich__, keep=True, console=console)

    # -- what the line shows ----------------------------------------------------------------
    def now(self) -> float:
        if self.exited_at is not None:
            return self.exited_at
        return self.elapsed + (time.monotonic() - self._elapsed_at)

    def total_epochs(self) -> int | None:
        return self.epochs or (self.expected.epochs if self.expected else None)

    def remaining(self) -> float | None:
        """Seconds left to the container's exit, estimated; None when nothing says."""
        now, total = self.now(), self.total_epochs()
        starts = self.epoch_starts
        if total and len(starts) >= 2:
            per_epoch = (starts[-1] - starts[0]) / (len(starts) - 1)
            left = total - len(starts)  # whole epochs after the current one
            return max(0.0, starts[-1] + per_epoch - now) + max(0, left) * per_epoch
        if self.expected and self.expected.exit_seconds is not None:
            return max(0.0, self.expected.exit_seconds - now)
        return None

    def __rich__(self) -> Text:
        """``train epoch 2/3 · 6 s · about 9 s left · 1 checkpoint, scored after the run``."""
        total = self.total_epochs()
        epoch = "-" if self.epoch is None else str(self.epoch)
        parts: list = [(f"{self.label} ", "bold")]
        if self.exited_at is None:
            parts.append(f"epoch {epoch}{f'/{total}' if total else ''} · {_duration(self.now())}")
            left = self.remaining()
            if left is not None:
                parts.append(f" · about {_duration(left)} left")
            elif self.timeout_s:
                parts.append(f" · ≤ {_duration(self.timeout_s - self.now())} left")  # the timeout: no estimate
            parts += [f" · {self.requests} checkpoint{'s' if self.requests != 1 else ''}, ",
                      ("scored after the run", "dim")]
            return Text.assemble(*parts)
        parts.append(f"ran {_duration(self.exited_at)} · scored {self.scored}/{self.requests}")
        if self.last_score is not None:
            hit = self.task.meets(self.last_score)
            parts += [f" · {self.task.metric} ", (f"{self.last_score * 100:.2f}%", "green" if hit else "yellow"),
                      f" / {self.task.threshold_percent:g}%"]
        return Text.assemble(*parts)

    # -- what the session tells it ----------------------------------------------------------
    def update(self, *, epoch=None, elapsed=None, score=None, evaluated=False, scored=False, epochs=None) -> None:
        """What the session saw; the live line draws itself from it four times a second."""
        if elapsed is not None:
            self.elapsed, self._elapsed_at = elapsed, time.monotonic()
        if epoch is not None:
            new = epoch != self.epoch
            if new:
                self.epoch_starts.append(self.elapsed)
            self.epoch = epoch
            if new:
                self._phase.update(step=True)
        if epochs is not None:
            self.epochs = epochs
        if evaluated:
            self.requests += 1
        if scored:
            self.scored += 1
        if score is not None:
            self.last_score = score

    def exited(self, elapsed: float) -> None:
        """The container has exited: the copied checkpoints are scored now."""
        self.exited_at = elapsed

    def __enter__(self):
        self._phase.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._phase.__exit__(*exc)  # returns None: an exception goes on; a log gets the last state
