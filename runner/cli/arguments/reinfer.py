"""``runner reinfer``'s arguments (``runner infer``, its earlier name, still works)."""

from __future__ import annotations

from pathlib import Path

from runner.cli import argtypes

DESCRIPTION = ("Time each backend on every evaluation item, one at a time, inside the "
               "entry's image, using the final model of an existing result (the latest by default), "
               "and rewrite that result's inference section.")


def register(p) -> None:
    p.add_argument("entry", help="entry folder, e.g. entries/mnist-cnn-cpu")
    p.add_argument("--backend", action="append", dest="backends", type=argtypes.backend, metavar="B",
                   help="backend to time (repeatable; default: the manifest's inference.backends)")
    p.add_argument("--result", type=Path, help="result folder (default: the entry's latest result)")
    p.add_argument("--threads", type=int, help="intra-op threads (default: the manifest's inference.threads)")
    p.add_argument("--json", action="store_true",
                   help="print the result folder and each backend's new record as JSON (progress to stderr)")
