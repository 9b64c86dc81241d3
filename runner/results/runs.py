"""Repeated runs of one entry: each TTA, the median, the coefficient of variation."""

from __future__ import annotations

import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class RunsSummary:
    runs: int
    reached: int
    ttas: list[float | None]  # per run, None where the threshold was not reached
    median: float | None
    cv: float | None  # stdev / mean of the runs that reached; None with fewer than two

    def to_dict(self) -> dict:
        return {
            "runs": self.runs,
            "reached": self.reached,
            "tta_seconds": self.ttas,
            "median_tta_seconds": self.median,
            "coefficient_of_variation": self.cv,
        }


def summarize_runs(ttas: list[float | None]) -> RunsSummary:
    reached = [t for t in ttas if t is not None]
    median = statistics.median(reached) if reached else None
    cv = statistics.stdev(reached) / statistics.mean(reached) if len(reached) >= 2 else None
    return RunsSummary(len(ttas), len(reached), list(ttas), median, cv)
