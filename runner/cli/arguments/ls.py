"""``runner ls``'s arguments."""

from runner.cli.argtypes import results_arguments

DESCRIPTION = ("List the runs under the results folder (or ENTRY's), one row per run, real runs "
               "before smoke runs: the short run id (seed and suffix; `runner show` takes it), status, whether "
               "it reached the threshold, its TTA, whether it is conforming, verified (signed by a trusted key, "
               "every file intact) and a smoke run.")


def register(p) -> None:
    p.add_argument("entry", nargs="?", help="an entry's name or folder (default: every entry)")
    results_arguments(p, "the runs (full run ids and folders)")
