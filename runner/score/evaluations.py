"""Score every evaluation the entry reported, from its predictions file, against the
harness' own labels."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

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


def resolve_inside(root: Path, relative: str) -> Path | None:
    """``root/relative`` if it stays inside ``root``; None for a path that escapes it."""
    path = (root / relative).resolve()
    return path if path.is_relative_to(root.resolve()) else None


def load_predictions(path: Path) -> np.ndarray | dict:
    if path.suffix == ".json":
        return json.loads(path.read_text())
    return np.load(path, allow_pickle=False)


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
        if path is None:
            problem = f"predictions path {ev.predictions!r} leaves the output folder"
        elif not path.is_file():
            problem = f"predictions file {ev.predictions} is missing"
        else:
            try:
                count, scores, problem = score_predictions(task, load_predictions(path), labels)
            except (ValueError, OSError) as exc:
                problem = f"predictions file {ev.predictions} is unreadable: {exc}"
        value = primary_score(task, scores)
        meets = problem is None and value is not None and task.meets(value)
        scored.append(
            ScoredEvaluation(
                ev.index, ev.epoch, ev.start, ev.stop, ev.predictions, count, scores, meets, problem
            )
        )
    return scored
