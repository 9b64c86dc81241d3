"""The leaderboard's figures as PNG files: an entry's time-to-accuracy curve with every run
overlaid, and its batch-1 latency distribution per backend. Matplotlib's Agg backend: no
display needed; no time stamp or software name in the files, so a site rebuilt from the same
results holds the same plots."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runner.dawnbench.claims import CurvePoint
from runner.dawnbench.tasks import FormatTask
from runner.plotting import pyplot


DPI = 100
SIZE = (6.4, 3.6)


def _time_axis(max_hours: float) -> tuple[float, str]:
    """A scale that keeps the numbers readable: seconds, minutes or hours."""
    if max_hours * 3600 < 180:
        return 3600.0, "seconds"
    if max_hours * 60 < 180:
        return 60.0, "minutes"
    return 1.0, "hours"


def _series(ft: FormatTask, points: list[CurvePoint], scale: float) -> tuple[list[float], list[float]]:
    return [p.hours * scale for p in points], [p.scores[ft.metric_field] for p in points]


@dataclass(frozen=True)
class RunCurve:
    """One run's curve on a reproduction's plot: its short label, points and whether it counts."""

    label: str
    points: list[CurvePoint]
    verified: bool


COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")


def _save(fig, ax, path: Path, title: str, legend: str) -> Path:
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc=legend)
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})
    pyplot().close(fig)
    return path


def runs_curve(path: Path, ft: FormatTask, runs: list[RunCurve], claimed: list[CurvePoint] | None = None,
               title: str = "Time to accuracy") -> Path:
    """Every run of an entry on one curve: accuracy against training time, both axes from zero
    (a few tenths of a point near the top must not look like a climb), the threshold, each
    run's first crossing marked; runs that do not count dashed; the claimed curve in grey."""
    everything = [p for run in runs for p in run.points] + (claimed or [])
    scale, unit = _time_axis(max(p.hours for p in everything))
    fig, ax = pyplot().subplots(figsize=SIZE, dpi=DPI)
    if claimed:
        x, y = _series(ft, claimed, scale)
        ax.plot(x, y, "o--", color="0.6", markersize=3, label="claimed")
    for run, color in zip(runs, COLORS * (len(runs) // len(COLORS) + 1)):
        x, y = _series(ft, run.points, scale)
        ax.plot(x, y, "o-" if run.verified else "o--", color=color, markersize=4, alpha=1.0 if run.verified else 0.6,
                label=run.label + ("" if run.verified else " (does not count)"))
        crossing = next((p for p in run.points if ft.task.meets(ft.to_fraction(p.scores[ft.metric_field]))), None)
        if crossing is not None:
            ax.plot([crossing.hours * scale], [crossing.scores[ft.metric_field]], marker="*", color=color,
                    markersize=12, linestyle="none")
    ax.axhline(ft.threshold, color="tab:red", linestyle=":", label=f"threshold {ft.threshold:g}")
    top = 100.0 if ft.percent else 1.0
    ax.set_xlim(left=0)
    ax.set_ylim(0, top * 1.02)
    ax.set_xlabel(f"training time ({unit}, evaluations excluded)")
    ax.set_ylabel(ft.metric_field + (" (%)" if ft.percent else ""))
    return _save(fig, ax, path, title, "lower right")


def latency_runs(path: Path, backend: str, runs: list[tuple[str, np.ndarray]]) -> Path:
    """One backend's per-item batch-1 latencies, every run of the entry overlaid (a step
    histogram each, its mean dashed), from zero; the last bin holds the tail beyond p99.5."""
    fig, ax = pyplot().subplots(figsize=SIZE, dpi=DPI)
    upper = max(float(np.percentile(ms, 99.5)) for _, ms in runs)
    bins = np.linspace(0, upper * 1.05, 80)
    for (label, ms), color in zip(runs, COLORS * (len(runs) // len(COLORS) + 1)):
        ax.hist(np.clip(ms, 0, bins[-1]), bins=bins, histtype="step", linewidth=1.5, color=color,
                label=f"{label}: mean {ms.mean():.4f} ms, p99 {np.percentile(ms, 99):.4f} ms")
        ax.axvline(float(ms.mean()), color=color, linestyle="--")
    ax.set_xlim(left=0)
    ax.set_xlabel("latency per item, batch 1 (ms)")
    ax.set_ylabel("items")
    return _save(fig, ax, path, f"{backend}: batch-1 latency", "upper left")
