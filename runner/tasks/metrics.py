"""Scoring predictions against labels the container never saw."""

from __future__ import annotations

import numpy as np

from runner.errors import UserError
from runner.tasks.base import Task


def topk_accuracy(predictions: np.ndarray, labels: np.ndarray, k: int) -> float:
    """Fraction of items whose label is among the first ``k`` ranked predictions.

    ``predictions`` is ``(N,)`` (top-1 classes) or ``(N, m)`` classes ranked best first.
    """
    preds = np.asarray(predictions)
    if preds.ndim == 1:
        if k != 1:
            raise UserError(
                f"top-{k} scoring needs ranked predictions of shape (N, >={k}), got (N,)",
                f"write the {k} best classes per item, best first",
            )
        preds = preds[:, None]
    if preds.ndim != 2 or preds.shape[1] < k:
        raise UserError(
            f"top-{k} scoring needs predictions of shape (N, >={k}), got {preds.shape}",
            f"write the {k} best classes per item, best first",
        )
    hits = (preds[:, :k] == np.asarray(labels)[:, None]).any(axis=1)
    return float(hits.mean())


def score_classification(task: Task, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """Every accuracy the task's curve reports (top-1, and top-5 where it applies)."""
    scores = {"top1": topk_accuracy(predictions, labels, 1)}
    if task.topk > 1:
        scores[f"top{task.topk}"] = topk_accuracy(predictions, labels, task.topk)
    return scores
