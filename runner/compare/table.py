"""The comparison as a rich table: one row per entry, medians with their CV."""

from __future__ import annotations

from rich.table import Table

from runner.compare.summary import EntrySummary, Stat
from runner.harness.backends import REGISTRY
from runner.terminal import MISSING, Column, compact_table, markup


def fmt(stat: Stat, digits: int = 1, unit: str = "") -> str:
    if stat.median is None:
        return MISSING
    text = f"{stat.median:.{digits}f}{unit}"
    if stat.cv is not None:
        text += f" ±{100 * stat.cv:.0f}%"
    return text


def tta_line(s: EntrySummary) -> str | None:
    """Below the table, per entry and profile: the median TTA, its resolution, and the runs it
    is of ("mnist-cnn-cpu on cpu-2core-x86-zen4: TTA 6.07 s (resolution 4.9 s), median of 3
    conforming runs, 5.91-6.40 s, CoV 4.1%"); None when no run reached the threshold."""
    stat = s.tta_seconds
    if stat.median is None:
        return None
    resolution = "" if s.tta_resolution_seconds.median is None else f" (resolution {s.tta_resolution_seconds.median:.1f} s)"
    runs = "smoke runs" if s.smoke and s.counted == s.smoke else "conforming runs"
    text = f"{markup(s.entry)} on {markup(s.profile or '?')}: TTA {stat.median:.2f} s{resolution}, "
    text += f"median of {stat.n} {runs}" if stat.n > 1 else f"1 {runs[:-1]} alone"
    if stat.n > 1:
        text += f", {stat.low:.2f}-{stat.high:.2f} s, CoV {100 * (stat.cv or 0):.1f}%"
    if s.counted < s.runs:
        text += f"; {s.runs - s.counted} non-conforming run(s) left out"
    return text


def native_backend(summary: EntrySummary) -> str | None:
    """The entry's own framework's backend among those it timed."""
    return next((b for b in summary.latency_p50_ms if REGISTRY.get(b) and REGISTRY[b].framework), None)


def _entry_cell(s: EntrySummary) -> str:
    return "\n".join(markup(x) for x in (s.entry, s.profile, s.framework) if x)


def comparison_tables(summaries: list[EntrySummary]) -> list[Table]:
    """Training (runs, TTA, epochs, s / epoch, cost) and, apart, batch-1 p50 per backend: two
    tables, so that neither is wider than a terminal of 80 columns."""
    training = []
    for s in summaries:
        runs = f"{s.runs} ({s.reached})" + (f", {s.smoke} smoke" if s.smoke else "")
        runs += f", {s.runs - s.counted} left out" if s.counted < s.runs else ""
        training.append([_entry_cell(s), runs, fmt(s.tta_seconds, 2), fmt(s.epochs_to_threshold, 0),
                         fmt(s.seconds_per_epoch, 2), fmt(s.cost_usd, 4)])
    tables = [compact_table("Side by side (median over the conforming runs, ±CV)", [
        Column("entry", wrap=True), Column("runs (reached)", wrap=True),
        Column("TTA s", number=True), Column("epochs", number=True), Column("s / epoch", number=True),
        Column("cost $", number=True)], training, show_lines=len(summaries) > 1)]
    others = sorted({b for s in summaries for b in s.latency_p50_ms if b != native_backend(s)})
    if any(s.latency_p50_ms for s in summaries):
        latency = []
        for s in summaries:
            native = native_backend(s)
            latency.append([markup(s.entry) + (f"\n{markup(s.profile)}" if s.profile else ""),
                            f"{fmt(s.latency_p50_ms[native], 3)}\n({markup(native)})" if native else MISSING,
                            *(fmt(s.latency_p50_ms[b], 3) if b in s.latency_p50_ms else MISSING for b in others)])
        tables.append(compact_table("Batch-1 p50 ms", [
            Column("entry", wrap=True), Column("native", number=True),
            *(Column(b, number=True) for b in others)], latency, show_lines=len(summaries) > 1))
    return tables
