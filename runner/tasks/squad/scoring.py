"""SQuAD v1.1 scoring: the official answer normalisation, EM and F1, max over ground truths."""

from __future__ import annotations

import re
import string
from collections import Counter

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and the articles a/an/the, fold white space."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def f1(prediction: str, truth: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    true_tokens = normalize_answer(truth).split()
    common = Counter(pred_tokens) & Counter(true_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(true_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, truth: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(truth))


def score_squad(predictions: dict[str, str], answers: dict[str, list[str]]) -> dict[str, float]:
    """EM and F1 as fractions over every question of ``answers``; a missing answer scores 0."""
    total_f1 = total_em = 0.0
    for qid, truths in answers.items():
        pred = predictions.get(qid, "")
        total_f1 += max(f1(pred, t) for t in truths)
        total_em += max(exact_match(pred, t) for t in truths)
    n = len(answers)
    return {"f1": total_f1 / n, "exact_match": total_em / n}


def score_task(task, predictions: dict[str, str], answers: dict[str, list[str]]) -> dict[str, float]:
    """The task's scorer (``Task.scorer``): SQuAD's scores do not depend on the task's fields."""
    return score_squad(predictions, answers)
