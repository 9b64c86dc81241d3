"""The leaderboard's figures as PNG files: a reproduction's time-to-accuracy curve and
its batch-1 latency distribution. Matplotlib's Agg backend: no display needed."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.dawnbench.claims import CurvePoint
from runner.dawnbench.tasks import FormatTask
from runner.leaderboard import formats
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


def tta_curve(path: Path, ft: FormatTask, points: list[CurvePoint], title: str,
              claimed: list[CurvePoint] | None = None) -> Path:
    """Accuracy against training time, the threshold, and the first crossing marked."""
    everything = points + (claimed or [])
    scale, unit = _time_axis(max(p.hours for p in everything))
    fig, ax = pyplot().subplots(figsize=SIZE, dpi=DPI)
    if claimed:
        x, y = _series(ft, claimed, scale)
        ax.plot(x, y, "o--", color="0.6", markersize=3, label="claimed curve")
    x, y = _series(ft, points, scale)
    ax.plot(x, y, "o-", color="tab:blue", markersize=4, label="reproduced")
    ax.axhline(ft.threshold, color="tab:red", linestyle=":", label=f"threshold {ft.threshold:g}")
    crossing = next((p for p in points if ft.task.meets(ft.to_fraction(p.scores[ft.metric_field]))), None)
    if crossing is not None:
        cx, cy = crossing.hours * scale, crossing.scores[ft.metric_field]
        ax.plot([cx], [cy], marker="*", color="tab:red", markersize=14, linestyle="none",
                label=f"first crossing: {formats.duration(crossing.hours * 3600)}")
        ax.axvline(cx, color="tab:red", alpha=0.3)
    ax.set_xlabel(f"training time ({unit}, evaluations excluded)")
    ax.set_ylabel(ft.metric_field + (" (%)" if ft.percent else ""))
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, format="png")
    pyplot().close(fig)
    return path


def latency_histogram(path: Path, latencies_ms: dict[str, np.ndarray], title: str) -> Path:
    """Each backend's per-item latencies (batch 1), with its mean (DAWNBench's figure) and p99."""
    fig, ax = pyplot().subplots(figsize=SIZE, dpi=DPI)
    upper = max(float(np.percentile(ms, 99.5)) for ms in latencies_ms.values())
    bins = np.linspace(0, upper * 1.05, 80)
    for (name, ms), color in zip(sorted(latencies_ms.items()), ("tab:blue", "tab:orange", "tab:green", "tab:purple")):
        ax.hist(np.clip(ms, 0, bins[-1]), bins=bins, alpha=0.55, color=color,
                label=f"{name}: mean {ms.mean():.4f} ms, p99 {np.percentile(ms, 99):.4f} ms")
        ax.axvline(float(ms.mean()), color=color, linestyle="--")
    ax.set_xlabel("latency per item, batch 1 (ms; the last bin holds the tail beyond p99.5)")
    ax.set_ylabel("items")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, format="png")
    pyplot().close(fig)
    return path
