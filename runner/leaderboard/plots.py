"""The leaderboard's figures as PNG files: an entry's time-to-accuracy curve with every run
overlaid, and its batch-1 latency distribution per backend. Matplotlib's Agg backend: no
display needed; no time stamp or software name in the files, so a site rebuilt from the same
results holds the same plots.

Each figure is drawn to show the data of the runs that count (verified reproductions):

- the axes span what those runs hold: the accuracy axis is zoomed to their points and the
  threshold (not from zero: a few tenths of a point apart must not lie on one line), the time
  axis ends after their last evaluation, the latency axis holds their items up to p99.5;
- a run that does not count is drawn dashed and faded, never stretching an axis: where it
  leaves the axes it is cut at the edge and marked there (``▶ to 612 s``: where its curve
  ends; ``▼``/``▲``: an evaluation below or above the accuracy axis; a latency run's ``▶``:
  items off the axis, counted in its legend); when no run counts, the axes span every run;
- the legend sits outside the axes (to their right), never on a line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runner.dawnbench.claims import CurvePoint
from runner.dawnbench.tasks import FormatTask
from runner.plotting import pyplot


DPI = 100
SIZE = (6.4, 3.6)  # the axes' figure; the legend to their right widens the PNG (bbox_inches="tight")
COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")
FADED = 0.55  # the alpha of a run that does not count
EDGE_BAND = 0.14  # the share of the time axis past the last counted evaluation: room for the edge marks
NOTE_GAP = 0.075  # the least distance between two edge notes (a fraction of the axes' height)
LEGEND = {"fontsize": 8, "loc": "upper left", "bbox_to_anchor": (1.02, 1.0), "borderaxespad": 0.0,
          "frameon": False}


@dataclass(frozen=True)
class RunCurve:
    """One run's curve on a reproduction's plot: its short label, points and whether it counts."""

    label: str
    points: list[CurvePoint]
    counts: bool


@dataclass(frozen=True)
class RunLatencies:
    """One run's per-item batch-1 latencies of a backend (ms) and whether the run counts."""

    label: str
    ms: np.ndarray
    counts: bool = True


@dataclass(frozen=True)
class Limits:
    low: float
    high: float

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high


def _colors(n: int) -> tuple[str, ...]:
    return (COLORS * (n // len(COLORS) + 1))[:n]


def _shown(runs: list) -> list:
    """The runs the axes are fitted to: those that count, else every run."""
    return [run for run in runs if run.counts] or list(runs)


def _time_axis(max_hours: float) -> tuple[float, str]:
    """A scale that keeps the numbers readable: seconds, minutes or hours."""
    if max_hours * 3600 < 180:
        return 3600.0, "seconds"
    if max_hours * 60 < 180:
        return 60.0, "minutes"
    return 1.0, "hours"


UNIT_SHORT = {"seconds": "s", "minutes": "min", "hours": "h"}


def _number(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def accuracy_limits(ft: FormatTask, runs: list[RunCurve]) -> Limits:
    """The accuracy axis: the points of the runs that count (else every run's) and the threshold,
    with a margin of an eighth of their span, at least 0.1 point (0.001 for a fraction) either
    side: one point, or points all equal, still get an axis around them. Never below zero."""
    values = [p.scores[ft.metric_field] for run in _shown(runs) for p in run.points] + [ft.threshold]
    low, high = min(values), max(values)
    margin = max((high - low) / 8, 0.1 if ft.percent else 0.001)
    return Limits(max(low - margin, 0.0), high + margin)


def time_limits(runs: list[RunCurve]) -> Limits:
    """The time axis, in hours: from zero to past the last evaluation of the runs that count
    (else of every run), with room at the right edge for the marks of runs cut there."""
    last = max((p.hours for run in _shown(runs) for p in run.points), default=0.0)
    last = last if last > 0 else 1 / 3600
    return Limits(0.0, last / (1 - EDGE_BAND))


def _series(ft: FormatTask, points: list[CurvePoint], scale: float) -> tuple[list[float], list[float]]:
    return [p.hours * scale for p in points], [p.scores[ft.metric_field] for p in points]


def _exit_height(x: list[float], y: list[float], right: float) -> float:
    """Where a curve crosses the right edge ``right`` (its last point's height when it starts past it)."""
    for (x0, y0), (x1, y1) in zip(zip(x, y), zip(x[1:], y[1:])):
        if x0 <= right < x1:
            return y0 + (y1 - y0) * (right - x0) / (x1 - x0)
    return y[-1]


def _spread(wanted: list[float], gap: float = NOTE_GAP) -> list[float]:
    """Heights (axes fractions, 0..1) moved apart by at least ``gap``, kept inside 0..1, each as
    near its wish as the others allow."""
    order = sorted(range(len(wanted)), key=lambda i: wanted[i])
    placed = [0.0] * len(wanted)
    floor = 0.04
    for i in order:
        placed[i] = max(min(wanted[i], 0.96), floor)
        floor = placed[i] + gap
    overflow = max(placed, default=0.0) - 0.96
    if overflow > 0:
        placed = [p - overflow for p in placed]
    return placed


def _edge_notes(ax, notes: list[tuple[float, str, str, float]]) -> None:
    """Marks on the right edge of the axes: (height as an axes fraction, text, colour, alpha),
    each a ▶ on the edge with its text (if any) just inside it, on a white ground."""
    for (_, text, color, alpha), height in zip(notes, _spread([n[0] for n in notes])):
        ax.plot([1.0], [height], marker=">", color=color, alpha=alpha, markersize=7, linestyle="none",
                transform=ax.transAxes, clip_on=False, zorder=5)
        if text:
            ax.annotate(text, (1.0, height), xycoords="axes fraction", xytext=(-7, 0), textcoords="offset points",
                        ha="right", va="center", fontsize=7.5, color=color, zorder=5,
                        bbox={"boxstyle": "square,pad=0.15", "facecolor": "white", "edgecolor": "none"})


def _fraction(limits: Limits, value: float) -> float:
    return (value - limits.low) / (limits.high - limits.low)


def _finish(fig, ax, title: str):
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(**LEGEND)
    return fig


def _save(fig, path: Path) -> Path:
    """The PNG, cut to what is drawn: the axes and the legend beside them."""
    fig.savefig(path, format="png", metadata={"Software": None}, bbox_inches="tight", pad_inches=0.08)
    pyplot().close(fig)
    return path


def runs_curve(path: Path, ft: FormatTask, runs: list[RunCurve], claimed: list[CurvePoint] | None = None,
               title: str = "Time to accuracy") -> Path:
    """``curve_figure`` as a PNG."""
    return _save(curve_figure(ft, runs, claimed, title), path)


def curve_figure(ft: FormatTask, runs: list[RunCurve], claimed: list[CurvePoint] | None = None,
                 title: str = "Time to accuracy"):
    """Every run of an entry on one curve: accuracy against training time, the axes fitted to
    the runs that count (``accuracy_limits``, ``time_limits``), the threshold, each run's first
    crossing starred; runs that do not count dashed and faded, cut at the edges and marked
    there; the claimed curve in grey (marked likewise: it never stretches an axis either)."""
    y_lim, t_lim = accuracy_limits(ft, runs), time_limits(runs)
    scale, unit = _time_axis(t_lim.high)
    x_lim = Limits(0.0, t_lim.high * scale)
    fig, ax = pyplot().subplots(figsize=SIZE, dpi=DPI)
    series = [("claimed", claimed, "0.55", True, "o--")] if claimed else []
    series += [(run.label + ("" if run.counts else " (does not count)"), run.points, color, run.counts,
                "o-" if run.counts else "o--") for run, color in zip(runs, _colors(len(runs)))]
    notes = []
    for label, points, color, counts, style in series:
        x, y = _series(ft, points, scale)
        alpha = 1.0 if counts else FADED
        ax.plot(x, y, style, color=color, markersize=4 if label != "claimed" else 3, alpha=alpha, label=label)
        crossing = next((p for p in points if ft.task.meets(ft.to_fraction(p.scores[ft.metric_field]))), None)
        if crossing is not None and label != "claimed" and x_lim.holds(crossing.hours * scale):
            ax.plot([crossing.hours * scale], [crossing.scores[ft.metric_field]], marker="*", color=color,
                    markersize=12, linestyle="none", alpha=alpha)
        for mark, outside in (("v", [(a, y_lim.low) for a, b in zip(x, y) if b < y_lim.low and x_lim.holds(a)]),
                              ("^", [(a, y_lim.high) for a, b in zip(x, y) if b > y_lim.high and x_lim.holds(a)])):
            if outside:
                ax.plot(*zip(*outside), marker=mark, color=color, alpha=alpha, markersize=6, linestyle="none",
                        clip_on=False)
        if x and max(x) > x_lim.high:
            height = min(max(_exit_height(x, y, x_lim.high), y_lim.low), y_lim.high)
            notes.append((_fraction(y_lim, height), f"to {_number(max(x))} {UNIT_SHORT[unit]}", color, alpha))
    _edge_notes(ax, notes)
    ax.axhline(ft.threshold, color="tab:red", linestyle=":", label=f"threshold {ft.threshold:g}")
    ax.set_xlim(x_lim.low, x_lim.high)
    ax.set_ylim(y_lim.low, y_lim.high)
    ax.set_xlabel(f"training time ({unit}, evaluations excluded)")
    ax.set_ylabel(ft.metric_field + (" (%)" if ft.percent else ""))
    return _finish(fig, ax, title)


def latency_limits(runs: list[RunLatencies]) -> Limits:
    """The latency axis (ms): from the lowest p0.5 to the highest p99.5 of the runs that count
    (else of every run), a twentieth of that span either side; from zero when zero is near
    (the lower end under a quarter of the upper)."""
    shown = _shown(runs)
    low = min(float(np.percentile(r.ms, 0.5)) for r in shown)
    high = max(float(np.percentile(r.ms, 99.5)) for r in shown)
    margin = max((high - low) / 20, high * 0.01, 1e-6)
    low = low - margin
    return Limits(0.0 if low < (high + margin) / 4 else low, high + margin)


def latency_runs(path: Path, backend: str, runs: list[RunLatencies]) -> Path:
    """``latency_figure`` as a PNG."""
    return _save(latency_figure(backend, runs), path)


def latency_figure(backend: str, runs: list[RunLatencies]):
    """One backend's per-item batch-1 latencies, every run of the entry overlaid (a step
    histogram each, its mean dashed) over ``latency_limits``. A counted run's items beyond the
    axis fall in its first or last bin (the tails past p0.5 and p99.5); a run that does not
    count is dashed and faded, its items beyond the axis left out, counted in its legend and
    marked ▶ on the right edge, so that it never stretches either axis."""
    limits = latency_limits(runs)
    fig, ax = pyplot().subplots(figsize=SIZE, dpi=DPI)
    bins = np.linspace(limits.low, limits.high, 80)
    notes = []
    for k, (run, color) in enumerate(zip(runs, _colors(len(runs)))):
        alpha, mean = 1.0 if run.counts else FADED, float(run.ms.mean())
        inside = run.ms[(run.ms >= limits.low) & (run.ms <= limits.high)]
        values = np.clip(run.ms, limits.low, limits.high) if run.counts else inside
        outside = run.ms.size - inside.size if not run.counts else 0
        label = (f"{run.label}{'' if run.counts else ' (does not count)'}\n"
                 f"mean {mean:.4f} ms, p99 {np.percentile(run.ms, 99):.4f} ms"
                 + (f"\n▶ {outside:,} of {run.ms.size:,} items off the axis" if outside else ""))
        ax.hist(values, bins=bins, histtype="step", linewidth=1.5, color=color, alpha=alpha, label=label,
                linestyle="-" if run.counts else "--")
        if limits.holds(mean):
            ax.axvline(mean, color=color, linestyle="--", alpha=alpha)
        if outside:
            notes.append((0.5 - NOTE_GAP * k, "", color, alpha))
    _edge_notes(ax, notes)
    ax.set_xlim(limits.low, limits.high)
    ax.set_xlabel("latency per item, batch 1 (ms)")
    ax.set_ylabel("items")
    return _finish(fig, ax, f"{backend}: batch-1 latency")
