"""``runner compare RESULT...``: signed results side by side, as DAWNBench showed them."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path

from rich.console import Console

from runner.bundle.open import open_results
from runner.cli.arguments.compare import PLOT_NAME
from runner.errors import UserError


def result_folders(paths: list[Path]) -> list[Path]:
    """Each path as given (a result folder or a bundle's .tar.gz), or the runs inside it when it
    is an entry's folder of runs."""
    found = []
    for path in paths:
        if path.is_dir() and not (path / "result.json").is_file():
            runs = sorted(p for p in path.iterdir() if (p / "result.json").is_file())
            if not runs:
                raise UserError(f"no result at {path}", "pass result folders such as results/ENTRY/RUN_ID, "
                                "bundles' .tar.gz, or an entry's folder of runs")
            found.extend(runs)
        else:
            found.append(path)  # a result folder, or a bundle open_results opens
    return found


def run(args) -> int:
    from runner.compare import figures, require_signed, summarise  # lazy: matplotlib and the verifier
    from runner.compare.plot import plot_comparison  # lazy: matplotlib
    from runner.compare.table import comparison_table, tta_line  # lazy: with runner.compare

    console = Console()
    with ExitStack() as stack:
        folders = open_results(result_folders(args.results), stack)
        for folder in folders:
            require_signed(folder)
        summaries = summarise([figures(folder) for folder in folders])
    console.print(comparison_table(summaries))
    for line in filter(None, map(tta_line, summaries)):
        console.print(line, highlight=False, soft_wrap=True)
    if any(s.smoke for s in summaries):
        console.print("[yellow]note[/]: smoke runs are pipeline checks on synthetic data, never benchmark figures")
    if not args.no_plot:
        # -o/--out DIR holds comparison.png; --plot FILE, the flag before it, names the file.
        console.print(f"plot: {plot_comparison(summaries, args.plot or args.out / PLOT_NAME)}")
    return 0
