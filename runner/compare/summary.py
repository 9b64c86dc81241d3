"""Group runs by entry and profile (the claim's profile they are compared with, by
``runner.claims.result_claim``; else their own): the median of each figure over the group's
conforming runs, their number, min-max and coefficient of variation. Non-conforming and smoke
runs are counted but never enter a figure, unless the group has nothing else (smoke runs are
pipeline checks: their figures are shown as such)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from runner.compare.figures import RunFigures


@dataclass(frozen=True)
class Stat:
    median: float | None
    cv: float | None  # sample standard deviation / mean; None for fewer than 2 values
    n: int
    low: float | None = None
    high: float | None = None

    @classmethod
    def of(cls, values: list[float | None]) -> "Stat":
        present = [float(v) for v in values if v is not None]
        if not present:
            return cls(None, None, 0)
        mean = statistics.fmean(present)
        cv = statistics.stdev(present) / mean if len(present) > 1 and mean else None
        return cls(statistics.median(present), cv, len(present), min(present), max(present))


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
    profile: str = ""
    counted: int = 0  # the runs the figures are of (the conforming ones)
    tta_resolution_seconds: Stat = Stat(None, None, 0)


def summarise(runs: list[RunFigures]) -> list[EntrySummary]:
    """One summary per entry and profile, in the order they first appear."""
    by_entry: dict[tuple[str, str], list[RunFigures]] = {}
    for run in runs:
        by_entry.setdefault((run.entry, run.profile), []).append(run)
    summaries = []
    for (entry, profile), everyone in by_entry.items():
        group = [r for r in everyone if r.conforming and not r.smoke] or [r for r in everyone if r.smoke]
        backends = sorted({b for r in group for b in r.latency_p50_ms})
        summaries.append(EntrySummary(
            entry=entry,
            framework=", ".join(sorted({r.framework for r in everyone})),
            runs=len(everyone),
            reached=sum(r.reached for r in everyone),
            smoke=sum(r.smoke for r in everyone),
            tta_seconds=Stat.of([r.tta_seconds for r in group]),
            epochs_to_threshold=Stat.of([r.epochs_to_threshold for r in group]),
            seconds_per_epoch=Stat.of([r.seconds_per_epoch for r in group]),
            cost_usd=Stat.of([r.cost_usd for r in group]),
            latency_p50_ms={b: Stat.of([r.latency_p50_ms.get(b) for r in group]) for b in backends},
            profile=profile,
            counted=len(group),
            tta_resolution_seconds=Stat.of([r.tta_resolution_seconds for r in group]),
        ))
    return summaries
