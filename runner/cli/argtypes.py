"""argparse types that refuse nonsense before any work starts (one line, exit 2), and the
flags the commands that read results share."""

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


def backend(text: str) -> str:
    """An inference backend of the harness' table. A type rather than ``choices``: the table is
    imported (with numpy) only when the option is given, never to print the help."""
    from runner.manifest.schema import BACKENDS  # lazy: heavy (the backend table imports numpy; --help must not)

    if text not in BACKENDS:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(map(repr, BACKENDS))})")
    return text
def trusted_keys_argument(parser: argparse.ArgumentParser) -> None:
    """``--trusted-keys`` of every command that judges whose signature counts (one help line)."""
    parser.add_argument("--trusted-keys", metavar="PATH",
                        help="a *.pub.json or a folder of them (default: your trust store and your own key, "
                        "as `runner keys list` shows them; keys beside bundles are not trusted by default)")


def results_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--results``, ``--trusted-keys`` and ``--json`` of a command that reads results
    (``what``: what its JSON holds)."""
    parser.add_argument("--results", metavar="DIR", help="the results folder (default: RUNNER_RESULTS or results/)")
    trusted_keys_argument(parser)
    parser.add_argument("--json", action="store_true", help=f"print {what} as JSON")
