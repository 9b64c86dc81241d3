"""The comparison as a PNG: TTA, time per epoch and batch-1 p50 per backend, per entry."""

from __future__ import annotations

from pathlib import Path

from runner.compare.summary import EntrySummary, Stat
from runner.plotting import pyplot


def _bar(ax, labels: list[str], stats: list[Stat], title: str, unit: str) -> None:
    heights = [s.median or 0.0 for s in stats]
    errors = [(s.cv or 0.0) * (s.median or 0.0) for s in stats]
    ax.bar(range(len(labels)), heights, yerr=errors, capsize=4, color="tab:blue")
    ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(unit)


def plot_comparison(summaries: list[EntrySummary], path: Path) -> Path:
    plt = pyplot()
    labels = [s.entry for s in summaries]
    backends = sorted({b for s in summaries for b in s.latency_p50_ms})
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2))
    _bar(axes[0], labels, [s.tta_seconds for s in summaries], "time to accuracy (median)", "s")
    _bar(axes[1], labels, [s.seconds_per_epoch for s in summaries], "time per epoch (median)", "s")
    width = 0.8 / max(1, len(backends))
    for i, backend in enumerate(backends):
        stats = [s.latency_p50_ms.get(backend, Stat(None, None, 0)) for s in summaries]
        axes[2].bar([x + i * width for x in range(len(labels))], [s.median or 0.0 for s in stats], width,
                    yerr=[(s.cv or 0.0) * (s.median or 0.0) for s in stats], capsize=3, label=backend)
    axes[2].set_xticks([x + 0.4 - width / 2 for x in range(len(labels))], labels, rotation=20, ha="right", fontsize=8)
    axes[2].set_title("batch-1 latency p50", fontsize=10)
    axes[2].set_ylabel("ms")
    if backends:
        axes[2].legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
