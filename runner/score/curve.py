"""DAWNBench's per-epoch curve: a TSV with ``epoch hours <accuracy columns>``."""

from __future__ import annotations

from pathlib import Path

from runner.score.evaluations import ScoredEvaluation
from runner.score.tta import Timeline
from runner.tasks import Task

# Our score keys -> DAWNBench's column names.
COLUMN_SCORE = {"top1Accuracy": "top1", "top5Accuracy": "top5", "f1Score": "f1"}
# DAWNBench writes accuracies in percent but SQuAD's F1 as a fraction (threshold 0.75).
FRACTION_COLUMNS = frozenset({"f1Score"})


def format_score(column: str, score: float) -> str:
    """One curve cell in DAWNBench's unit for ``column``."""
    if column in FRACTION_COLUMNS:
        return f"{score:.4f}"
    return f"{score * 100:.2f}"


def curve_rows(task: Task, line: Timeline, scored: list[ScoredEvaluation]) -> list[list[str]]:
    rows = []
    for ev in scored:
        hours = line.train_seconds_at(ev.index) / 3600
        epoch = ev.epoch if ev.epoch is not None else ev.index + 1
        values = [
            format_score(col, ev.scores[COLUMN_SCORE[col]]) if COLUMN_SCORE[col] in ev.scores else ""
            for col in task.curve_columns
        ]
        rows.append([str(epoch), f"{hours:.6f}", *values])
    return rows


def write_curve(path: Path, task: Task, line: Timeline, scored: list[ScoredEvaluation]) -> None:
    header = ["epoch", "hours", *task.curve_columns]
    lines = ["\t".join(header)] + ["\t".join(r) for r in curve_rows(task, line, scored)]
    path.write_text("\n".join(lines) + "\n")
