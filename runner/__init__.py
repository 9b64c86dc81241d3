"""runner: re-run deep-learning benchmark claims and sign what was measured."""

__version__ = "0.1.0"
