"""Repeated runs of one entry: each TTA, the median, the coefficient of variation, and
the ``runs-<first run id>.json`` that records them beside the runs' folders."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from runner.results.folder import write_json
from runner.results.record import Result


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
    mean = statistics.mean(reached) if reached else 0
    cv = statistics.stdev(reached) / mean if len(reached) >= 2 and mean else None  # no ratio to a zero mean
    return RunsSummary(len(ttas), len(reached), list(ttas), median, cv)


def summarize_folders(folders: list[Path]) -> RunsSummary:
    """The summary of result folders, each run's TTA read back from its result.json."""
    return summarize_runs([Result.read(folder).tta_seconds for folder in folders])


def write_runs_summary(folders: list[Path]) -> tuple[RunsSummary, Path]:
    """Summarize repeated runs into ``runs-<first run id>.json`` beside their folders."""
    summary = summarize_folders(folders)
    path = folders[0].parent / f"runs-{folders[0].name}.json"
    write_json(path, {"run_ids": [f.name for f in folders], **summary.to_dict()})
    return summary, path
