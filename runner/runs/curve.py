"""A time-to-accuracy curve drawn in a terminal with plain characters: each evaluation a dot
at its training time (evaluations excluded, as DAWNBench's ``hours``) and score, the threshold
a dashed line, the crossing marked. The time axis starts at zero; the score axis spans the
points and the threshold (a curve from 60 % to 99.7 % and one from 99.17 % to 99.38 % both
fill the plot, and its labels say the range).
"""

from __future__ import annotations

import math

POINT, CROSSING, THRESHOLD = "●", "◆", "┄"
MIN_WIDTH, HEIGHT = 30, 10


def _label(value: float, unit: str) -> str:
    return f"{value:.2f}{unit}" if unit == "%" else f"{value:.3f}"


def _nice_seconds(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def draw_curve(points: list[tuple[float, float]], threshold: float, unit: str = "%",
               width: int = 80, height: int = HEIGHT) -> list[str]:
    """Lines of at most ``width`` characters: ``points`` are (training seconds, score in
    ``unit``: "%" or "" for a fraction), ``threshold`` in the same unit. No points: one line."""
    points = [(t, s) for t, s in points if math.isfinite(t) and math.isfinite(s)]
    if not points:
        return ["no evaluations to draw"]
    scores = [s for _, s in points] + [threshold]
    low, high = min(scores), max(scores)
    if high - low < 1e-9:
        low, high = low - 0.5, high + 0.5
    labels = [_label(high, unit), _label(low, unit), _label(threshold, unit)]
    margin = max(len(x) for x in labels) + 1
    cols = max(MIN_WIDTH, width - margin - 1)
    t_max = max(t for t, _ in points) or 1.0

    def row(score: float) -> int:  # 0 at the top
        return round((high - score) / (high - low) * (height - 1))

    def col(seconds: float) -> int:
        return min(cols - 1, round(seconds / t_max * (cols - 1)))

    grid = [[" "] * cols for _ in range(height)]
    line = row(threshold)
    for x in range(0, cols, 2):
        grid[line][x] = THRESHOLD
    crossed = False
    for t, s in points:
        mark = POINT
        if not crossed and s >= threshold:
            mark, crossed = CROSSING, True
        grid[row(s)][col(t)] = mark
    out = []
    for y, cells in enumerate(grid):
        label = labels[2] if y == line else labels[0] if y == 0 else labels[1] if y == height - 1 else ""
        out.append(f"{label:>{margin - 1}} │{''.join(cells)}".rstrip())
    out.append(" " * margin + "└" + "─" * cols)
    left, right, middle = "0 s", _nice_seconds(t_max), "training time, evaluations excluded"
    gap = cols - len(left) - len(right)
    axis = left + (middle.center(gap) if gap >= len(middle) + 2 else " " * gap) + right
    out.append(" " * (margin + 1) + axis)
    out.append(" " * (margin + 1) + f"{POINT} evaluation  {CROSSING} first crossing  {THRESHOLD} threshold")
    return out
