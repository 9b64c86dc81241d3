"""PNG plots for the studies (matplotlib, no display: the Agg backend)."""

from __future__ import annotations

from pathlib import Path

from runner.plotting import pyplot


def figure(ncols: int = 1, width: float = 5.2):
    """A row of ``ncols`` plots, each ``width`` inches wide."""
    fig, axes = pyplot().subplots(1, ncols, figsize=(width * ncols, 3.8), squeeze=False)
    return fig, list(axes[0])


def save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # legends placed outside stay in
    pyplot().close(fig)
    return path.name
