"""Confidence intervals for accuracies (fractions of items right) and their differences.

- one accuracy: Wilson's score interval (Wilson 1927), which stays inside [0, 1] and keeps
  its coverage near 0 and 1, where test-set accuracies live;
- the difference of two accuracies on independent item sets (the original test set and a
  second one): Newcombe's hybrid score interval (Newcombe 1998, method 10), built from the
  two Wilson intervals;
- the difference of two accuracies on the same items (the same head on two feature sets):
  the paired Wald interval from the discordant items, ``(b - c) / n`` with variance
  ``(b + c - (b - c)^2 / n) / n^2``.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm

CONFIDENCE = 0.95


def _z(confidence: float) -> float:
    return float(norm.ppf(0.5 + confidence / 2))


def wilson(correct: int, items: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson's score interval for ``correct`` of ``items``."""
    if items <= 0:
        raise ValueError("an accuracy needs at least one item")
    z, p = _z(confidence), correct / items
    centre = (p + z * z / (2 * items)) / (1 + z * z / items)
    half = z / (1 + z * z / items) * math.sqrt(p * (1 - p) / items + z * z / (4 * items * items))
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe(correct1: int, items1: int, correct2: int, items2: int,
             confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(p1 - p2, lower, upper): Newcombe's hybrid score interval for the difference of two
    independent proportions."""
    p1, p2 = correct1 / items1, correct2 / items2
    l1, u1 = wilson(correct1, items1, confidence)
    l2, u2 = wilson(correct2, items2, confidence)
    d = p1 - p2
    return d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def paired(right1, right2, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """(p1 - p2, lower, upper) for two classifiers' right/wrong on the same items (boolean
    sequences of equal length): the paired Wald interval from the discordant items."""
    r1, r2 = np.asarray(right1, dtype=bool), np.asarray(right2, dtype=bool)
    n = len(r1)
    if n == 0 or r2.shape != r1.shape:
        raise ValueError("paired accuracies need the same, non-empty items")
    b, c = int((r1 & ~r2).sum()), int((~r1 & r2).sum())
    d = (b - c) / n
    half = _z(confidence) * math.sqrt(max(0.0, b + c - (b - c) ** 2 / n)) / n
    return d, d - half, d + half
