"""PNG plots for the studies (matplotlib, no display: the Agg backend)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)


def figure(ncols: int = 1, width: float = 5.2):
    """A row of ``ncols`` plots, each ``width`` inches wide."""
    fig, axes = plt.subplots(1, ncols, figsize=(width * ncols, 3.8), squeeze=False)
    return fig, list(axes[0])


def save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")  # legends placed outside stay in
    plt.close(fig)
    return path.name
