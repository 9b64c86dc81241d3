"""``runner ls [ENTRY]``: the runs under the results folder, one row each."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner import paths
from runner.cli import argtypes


def run(args) -> int:
    from runner.runs import list_runs  # lazy: signature checks import verify's modules
    from runner.runs.terminal import ls_renderables  # lazy: as above
    from runner.verify.trust import default_trusted_keys  # lazy: as above

    results = Path(args.results) if args.results else paths.results_dir()
    entry = Path(args.entry).name if args.entry else None
    rows, skipped = list_runs(results, entry, default_trusted_keys(args.trusted_keys, results))
    if args.json:
        print(json.dumps({"results": str(results), "runs": [r.to_dict() for r in rows], "skipped": skipped},
                         indent=2))
        return 0
    console = Console(highlight=False)
    for problem in skipped:
        console.print(f"[yellow]skipped[/]: {escape(problem)}")
    if not rows:
        where = f"of {entry} " if entry else ""
        console.print(f"no runs {where}under {escape(str(results))} (`runner reproduce ENTRY` makes one)")
        return 0
    for i, renderable in enumerate(ls_renderables(rows, console.width)):
        if i:
            console.print()
        console.print(renderable)
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ls", help="list the runs: status, reached, TTA, conforming, verified, smoke",
        description="List the runs under the results folder (or ENTRY's), one row per run, real runs "
        "before smoke runs: the short run id (seed and suffix; `runner show` takes it), status, whether "
        "it reached the threshold, its TTA, whether it is conforming, verified (signed by a trusted key, "
        "every file intact) and a smoke run.",
    )
    p.add_argument("entry", nargs="?", help="an entry's name or folder (default: every entry)")
    argtypes.results_arguments(p, "the runs (full run ids and folders)")
    p.set_defaults(func=run)
