"""``runner compare``'s arguments."""

from __future__ import annotations

import argparse
from pathlib import Path

from runner.cli.argtypes import trusted_keys_argument

PLOT_NAME = "comparison.png"  # what -o/--out DIR holds

DESCRIPTION = ("Print and plot runs side by side: per entry, the median and CV of "
               "TTA, epochs to threshold, time per epoch, batch-1 p50 per backend and cost. A run that "
               "`runner verify` does not verify is refused; one that verifies but does not count (a smoke "
               "run, non-conforming, incomplete, a variant) is left out unless --all-runs.")


def register(p) -> None:
    p.add_argument("results", nargs="+", type=Path, metavar="RESULT",
                   help="result folders (results/ENTRY/RUN_ID) or bundles' .tar.gz; a folder of runs "
                   "takes every run in it")
    out = p.add_mutually_exclusive_group()
    out.add_argument("-o", "--out", type=Path, default=Path("."), metavar="DIR",
                     help=f"folder to write the plot, {PLOT_NAME}, into (default: here)")
    # Before -o/--out, --plot named the PNG itself: old scripts' --plot FILE still writes FILE.
    out.add_argument("--plot", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--no-plot", action="store_true", help="print the table only")
    p.add_argument("--all-runs", action="store_true",
                   help="compare runs that verify but do not count too (each left-out run is named otherwise)")
    trusted_keys_argument(p)
    p.add_argument("--json", action="store_true", help="print each entry's figures (median, CV, min, max, n) as JSON")
