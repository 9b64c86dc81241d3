"""Matplotlib for the project's PNG figures (studies, leaderboard, compare): one place that
picks the Agg backend, so no figure needs a display."""

from __future__ import annotations


def pyplot():
    """``matplotlib.pyplot`` with the Agg backend. Imported on first use: pyplot costs half a
    second of every ``runner`` command's start."""
    import matplotlib  # lazy: heavy (matplotlib)

    matplotlib.use("Agg")  # set before pyplot is imported
    import matplotlib.pyplot as plt  # lazy: heavy (matplotlib)

    return plt
