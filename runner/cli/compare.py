"""``runner compare RESULT...``: signed results side by side, as DAWNBench showed them."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from runner.errors import UserError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compare",
        help="compare signed results side by side (TTA, epochs, s/epoch, batch-1 p50, cost)",
        description="Print and plot signed results side by side: per entry, the median and CV of "
                    "TTA, epochs to threshold, time per epoch, batch-1 p50 per backend and cost.",
    )
    p.add_argument("results", nargs="+", type=Path, metavar="RESULT",
                   help="result folders (results/ENTRY/RUN_ID); a folder of runs takes every run in it")
    p.add_argument("--plot", type=Path, default=Path("comparison.png"), help="PNG to write (default comparison.png)")
    p.add_argument("--no-plot", action="store_true", help="print the table only")
    p.set_defaults(func=run)


def result_folders(paths: list[Path]) -> list[Path]:
    """Each path as given, or the runs inside it when it is an entry's folder of runs."""
    folders = []
    for path in paths:
        if (path / "result.json").is_file():
            folders.append(path)
        elif path.is_dir() and (runs := sorted(p for p in path.iterdir() if (p / "result.json").is_file())):
            folders.extend(runs)
        else:
            raise UserError(f"no result at {path}", "pass result folders such as results/ENTRY/RUN_ID")
    return folders


def run(args) -> int:
    from runner.compare import figures, require_signed, summarise  # lazy: start-up (runner --help)
    from runner.compare.plot import plot_comparison  # lazy: start-up (runner --help)
    from runner.compare.table import comparison_table, tta_line  # lazy: start-up (runner --help)

    console = Console()
    folders = result_folders(args.results)
    for folder in folders:
        require_signed(folder)
    summaries = summarise([figures(folder) for folder in folders])
    console.print(comparison_table(summaries))
    for line in filter(None, map(tta_line, summaries)):
        console.print(line, highlight=False, soft_wrap=True)
    if any(s.smoke for s in summaries):
        console.print("[yellow]note[/]: smoke runs are pipeline checks on synthetic data, never benchmark figures")
    if not args.no_plot:
        console.print(f"plot: {plot_comparison(summaries, args.plot)}")
    return 0
