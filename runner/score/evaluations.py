"""Score every evaluation the entry reported, from its predictions file, against the
harness' own labels."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from runner.run.events import bounded_json
from runner.score.safe_npy import load_npy
from runner.score.tta import Timeline
from runner.tasks import Task
from runner.tasks.metrics import score_classification
from runner.tasks.squad import score_squad


@dataclass
class ScoredEvaluation:
    index: int
    epoch: int | None
    start: float
    stop: float
    predictions: str
    count: int | None  # rows in the predictions file; None when unreadable
    scores: dict[str, float]
    meets: bool
    problem: str | None = None  # why this evaluation could not be scored

    def to_dict(self) -> dict:
        return asdict(self)


MAX_JSON_PREDICTIONS_BYTES = 256 << 20


def path_problem(relative: object) -> str | None:
    """Why an entry-given path cannot name a file (None when it can)."""
    if not isinstance(relative, str) or not relative:
        return f"predictions path {relative!r} is not a file name"
    if len(relative) > 1024 or any(ord(c) < 32 or c == "\x7f" for c in relative):
        return f"predictions path {relative[:80]!r} holds control characters or is too long"
    return None


def resolve_inside(root: Path, relative: str) -> Path | None:
    """``root/relative`` if it stays inside ``root``; None for a path that escapes it
    or cannot be a path at all (a NUL byte, a name too long)."""
    if path_problem(relative):
        return None
    try:
        path = (root / relative).resolve()
    except (OSError, ValueError, RuntimeError):
        return None
    return path if path.is_relative_to(root.resolve()) else None


def load_predictions(path: Path) -> np.ndarray | dict:
    """An entry's (or a bundle's) predictions, read within limits: ValueError otherwise."""
    if path.suffix == ".json":
        if path.stat().st_size > MAX_JSON_PREDICTIONS_BYTES:
            raise ValueError(f"over {MAX_JSON_PREDICTIONS_BYTES} bytes")
        return bounded_json(path.read_text(encoding="utf-8", errors="replace"))
    return load_npy(path)


def score_predictions(task: Task, preds, labels) -> tuple[int, dict[str, float], str | None]:
    """(count, scores, problem). A count that differs from the labels' scores nothing."""
    expected = len(labels)
    count = len(preds)
    if count != expected:
        return count, {}, f"{count} predictions for an evaluation set of {expected}"
    if task.metric == "f1":
        return count, score_squad(preds, labels), None
    return count, score_classification(task, preds, labels), None


def primary_score(task: Task, scores: dict[str, float]) -> float | None:
    return scores.get(task.metric)


def score_evaluations(
    task: Task, line: Timeline, output_dir: Path, labels
) -> list[ScoredEvaluation]:
    scored: list[ScoredEvaluation] = []
    for ev in line.evaluations:
        path = resolve_inside(output_dir, ev.predictions)
        count, scores, problem = None, {}, None
        if path_problem(ev.predictions):
            problem = path_problem(ev.predictions)
        elif path is None:
            problem = f"predictions path {ev.predictions!r} leaves the output folder"
        elif not path.is_file():
            problem = f"predictions file {ev.predictions} is missing"
        else:
            try:
                count, scores, problem = score_predictions(task, load_predictions(path), labels)
            except (ValueError, OSError, TypeError, MemoryError) as exc:
                problem = f"predictions file {ev.predictions} is unreadable: {exc}"
        value = primary_score(task, scores)
        meets = problem is None and value is not None and task.meets(value)
        scored.append(
            ScoredEvaluation(
                ev.index, ev.epoch, ev.start, ev.stop, ev.predictions, count, scores, meets, problem
            )
        )
    return scored
