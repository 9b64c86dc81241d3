"""The comparison as a rich table: one row per entry, medians with their CV."""

from __future__ import annotations

from rich.table import Table

from runner.compare.summary import EntrySummary, Stat
from runner.harness.backends import REGISTRY


def fmt(stat: Stat, digits: int = 1, unit: str = "") -> str:
    if stat.median is None:
        return "-"
    text = f"{stat.median:.{digits}f}{unit}"
    if stat.cv is not None:
        text += f" ±{100 * stat.cv:.0f}%"
    return text


def native_backend(summary: EntrySummary) -> str | None:
    """The entry's own framework's backend among those it timed."""
    return next((b for b in summary.latency_p50_ms if REGISTRY.get(b) and REGISTRY[b].framework), None)


def comparison_table(summaries: list[EntrySummary]) -> Table:
    others = sorted({b for s in summaries for b in s.latency_p50_ms if b != native_backend(s)})
    table = Table(title="Side by side (median over runs, ±CV)", title_justify="left")
    for column in ("entry", "framework", "runs (reached)", "TTA s", "epochs to threshold", "s / epoch",
                   "p50 native ms", *(f"p50 {b} ms" for b in others), "cost $"):
        table.add_column(column, justify="left" if column in ("entry", "framework") else "right")
    for s in summaries:
        native = native_backend(s)
        runs = f"{s.runs} ({s.reached})" + (f", {s.smoke} smoke" if s.smoke else "")
        table.add_row(
            s.entry, s.framework, runs, fmt(s.tta_seconds), fmt(s.epochs_to_threshold, 0),
            fmt(s.seconds_per_epoch, 2),
            f"{fmt(s.latency_p50_ms[native], 3)} ({native})" if native else "-",
            *(fmt(s.latency_p50_ms[b], 3) if b in s.latency_p50_ms else "-" for b in others),
            fmt(s.cost_usd, 4),
        )
    return table
