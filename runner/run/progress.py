"""Live progress of a training run: epoch, elapsed time, last score against the threshold."""

from __future__ import annotations

from rich.console import Console
from rich.live import Live
from rich.text import Text

from runner.tasks import Task


class TrainingProgress:
    def __init__(self, task: Task, label: str, console: Console | None = None):
        self.task = task
        self.label = label
        self.console = console or Console(stderr=True)
        self.epoch: int | None = None
        self.elapsed = 0.0
        self.last_score: float | None = None
        self.evaluations = 0
        self._live = Live(self._render(), console=self.console, refresh_per_second=4,
                          transient=False)

    def _render(self) -> Text:
        score = (
            f"{self.last_score * 100:.2f}%" if self.last_score is not None else "--"
        )
        hit = self.last_score is not None and self.task.meets(self.last_score)
        return Text.assemble(
            (f"{self.label} ", "bold"),
            f"epoch {self.epoch if self.epoch is not None else '-'}  ",
            f"{self.elapsed:7.1f} s  ",
            f"evals {self.evaluations}  ",
            f"last {self.task.metric} ",
            (score, "green" if hit else "yellow"),
            f" / {self.task.threshold_percent:g}%",
        )

    def update(self, *, epoch=None, elapsed=None, score=None, evaluated=False) -> None:
        if epoch is not None:
            self.epoch = epoch
        if elapsed is not None:
            self.elapsed = elapsed
        if score is not None:
            self.last_score = score
        if evaluated:
            self.evaluations += 1
        self._live.update(self._render())

    def __enter__(self):
        self._live.__enter__()
        return self

    def __exit__(self, *exc):
        result = self._live.__exit__(*exc)
        if not self.console.is_terminal:
            self.console.line()  # a log file gets the last state as a line of its own
        return result
