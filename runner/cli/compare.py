"""``runner compare RESULT...``: signed results side by side, as DAWNBench showed them."""

from __future__ import annotations

import json
from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from runner.bundle.open import open_results
from runner.cli.arguments.compare import PLOT_NAME
from runner.errors import UserError
from runner.results.layout import entry_runs


def result_folders(paths: list[Path]) -> list[Path]:
    """Each path as given (a result folder or a bundle's .tar.gz), or the runs inside it when it
    is an entry's folder of runs."""
    found = []
    for path in paths:
        if path.is_dir() and not (path / "result.json").is_file():
            runs = entry_runs(path.parent, path.name)  # its real and smoke runs
            if not runs:
                raise UserError(f"no result at {path}", "pass result folders such as results/ENTRY/RUN_ID, "
                                "bundles' .tar.gz, or an entry's folder of runs")
            found.extend(runs)
        else:
            found.append(path)  # a result folder, or a bundle open_results opens
    return found


def run(args) -> int:
    from runner.compare import figures, require_signed, summarise  # lazy: heavy (matplotlib and the verifier)
    from runner.compare.plot import plot_comparison  # lazy: heavy (matplotlib)
    from runner.compare.table import comparison_tables, tta_line  # lazy: start-up (with runner.compare)

    console = Console()
    given = result_folders(args.results)
    with ExitStack() as stack:
        folders = open_results(given, stack)
        for folder in folders:
            require_signed(folder)
        summaries = summarise([figures(folder) for folder in folders])
    # -o/--out DIR holds comparison.png; --plot FILE, the flag before it, names the file.
    plot_path = None if args.no_plot else (args.plot or args.out / PLOT_NAME)
    if args.json:
        plot = None if plot_path is None else str(plot_comparison(summaries, plot_path))
        print(json.dumps({"runs": [str(f) for f in given], "entries": [asdict(s) for s in summaries],
                          "plot": plot}, indent=2))
        return 0
    for table in comparison_tables(summaries):
        console.print(table)
    for line in filter(None, map(tta_line, summaries)):
        console.print(line, highlight=False)
    if any(s.smoke for s in summaries):
        console.print("[yellow]note[/]: smoke runs are pipeline checks on synthetic data, never benchmark figures")
    if plot_path is not None:
        console.print(f"plot: {plot_comparison(summaries, plot_path)}")
    return 0
