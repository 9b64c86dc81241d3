"""Group runs by entry: the median of each figure and its coefficient of variation."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from runner.compare.figures import RunFigures


@dataclass(frozen=True)
class Stat:
    median: float | None
    cv: float | None  # sample standard deviation / mean; None for fewer than 2 values
    n: int

    @classmethod
    def of(cls, values: list[float | None]) -> "Stat":
        present = [float(v) for v in values if v is not None]
        if not present:
            return cls(None, None, 0)
        mean = statistics.fmean(present)
        cv = statistics.stdev(present) / mean if len(present) > 1 and mean else None
        return cls(statistics.median(present), cv, len(present))


@dataclass
class EntrySummary:
    entry: str
    framework: str
    runs: int
    reached: int
    smoke: int
    tta_seconds: Stat
    epochs_to_threshold: Stat
    seconds_per_epoch: Stat
    cost_usd: Stat
    latency_p50_ms: dict[str, Stat] = field(default_factory=dict)


def summarise(runs: list[RunFigures]) -> list[EntrySummary]:
    """One summary per entry, in the order the entries first appear."""
    by_entry: dict[str, list[RunFigures]] = {}
    for run in runs:
        by_entry.setdefault(run.entry, []).append(run)
    summaries = []
    for entry, group in by_entry.items():
        backends = sorted({b for r in group for b in r.latency_p50_ms})
        summaries.append(EntrySummary(
            entry=entry,
            framework=", ".join(sorted({r.framework for r in group})),
            runs=len(group),
            reached=sum(r.reached for r in group),
            smoke=sum(r.smoke for r in group),
            tta_seconds=Stat.of([r.tta_seconds for r in group]),
            epochs_to_threshold=Stat.of([r.epochs_to_threshold for r in group]),
            seconds_per_epoch=Stat.of([r.seconds_per_epoch for r in group]),
            cost_usd=Stat.of([r.cost_usd for r in group]),
            latency_p50_ms={b: Stat.of([r.latency_p50_ms.get(b) for r in group]) for b in backends},
        ))
    return summaries
