"""PNG plots for the studies (matplotlib, no display: the Agg backend)."""

from __future__ import annotations

from pathlib import Path


def _pyplot():
    # Imported on first use: pyplot costs half a second of every `runner` command's start.
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure(ncols: int = 1, width: float = 5.2):
    """A row of ``ncols`` plots, each ``width`` inches wide."""
    fig, axes = _pyplot().subplots(1, ncols, figsize=(width * ncols, 3.8), squeeze=False)
    return fig, list(axes[0])


def save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # legends placed outside stay in
    _pyplot().close(fig)
    return path.name
