"""``runner compare RESULT...``: signed results side by side, as DAWNBench showed them."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from runner.errors import UserError
from runner.results.layout import entry_runs


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compare",
        help="compare signed results side by side (TTA, epochs, s/epoch, batch-1 p50, cost)",
        description="Print and plot signed results side by side: per entry, the median and CV of "
                    "TTA, epochs to threshold, time per epoch, batch-1 p50 per backend and cost.",
    )
    p.add_argument("results", nargs="+", type=Path, metavar="RESULT",
                   help="result folders (results/ENTRY/RUN_ID); an entry's folder takes every run in it, smoke runs too")
    p.add_argument("--plot", type=Path, default=Path("comparison.png"), help="PNG to write (default comparison.png)")
    p.add_argument("--no-plot", action="store_true", help="print the table only")
    p.add_argument("--json", action="store_true", help="print each entry's figures (median, CV, min, max, n) as JSON")
    p.set_defaults(func=run)


def result_folders(paths: list[Path]) -> list[Path]:
    """Each path as given, or the runs inside it when it is an entry's folder of runs."""
    folders = []
    for path in paths:
        if (path / "result.json").is_file():
            folders.append(path)
        elif path.is_dir() and (runs := entry_runs(path.parent, path.name)):  # its real and smoke runs
            folders.extend(runs)
        else:
            raise UserError(f"no result at {path}", "pass result folders such as results/ENTRY/RUN_ID")
    return folders


def run(args) -> int:
    from runner.compare import figures, require_signed, summarise
    from runner.compare.plot import plot_comparison
    from runner.compare.table import comparison_tables, tta_line  # lazy: the comparison's modules, when it runs

    console = Console()
    folders = result_folders(args.results)
    for folder in folders:
        require_signed(folder)
    summaries = summarise([figures(folder) for folder in folders])
    if args.json:
        plot = None if args.no_plot else str(plot_comparison(summaries, args.plot))
        print(json.dumps({"runs": [str(f) for f in folders], "entries": [asdict(s) for s in summaries],
                          "plot": plot}, indent=2))
        return 0
    for table in comparison_tables(summaries):
        console.print(table)
    for line in filter(None, map(tta_line, summaries)):
        console.print(line, highlight=False)
    if any(s.smoke for s in summaries):
        console.print("[yellow]note[/]: smoke runs are pipeline checks on synthetic data, never benchmark figures")
    if not args.no_plot:
        console.print(f"plot: {plot_comparison(summaries, args.plot)}")
    return 0
