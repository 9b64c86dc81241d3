"""argparse types that refuse nonsense before any work starts (one line, exit 2)."""

from __future__ import annotations

import argparse
import math

MAX_RUNS = 1000
MAX_TIMEOUT_MINUTES = 7 * 24 * 60
MAX_SEED = 2**31 - 1
MAX_ITEMS = 10**7


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None


def run_count(text: str) -> int:
    value = _int(text)
    if not 1 <= value <= MAX_RUNS:
        raise argparse.ArgumentTypeError(f"{value} runs: give 1 to {MAX_RUNS}")
    return value


def item_count(text: str) -> int:
    value = _int(text)
    if not 1 <= value <= MAX_ITEMS:
        raise argparse.ArgumentTypeError(f"{value} items: give 1 to {MAX_ITEMS}")
    return value


def seed(text: str) -> int:
    value = _int(text)
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"seed {value}: give 0 to {MAX_SEED}")
    return value


def timeout_minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a number of minutes") from None
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_MINUTES:
        raise argparse.ArgumentTypeError(f"{text[:40]} minutes: give more than 0 and at most {MAX_TIMEOUT_MINUTES}")
    return value
