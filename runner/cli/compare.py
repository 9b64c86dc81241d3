"""``runner compare RESULT...``: runs side by side, as DAWNBench showed them. Each run is
judged once (``runner.verify.verdict``): one that does not verify is refused, one that
verifies but does not count is left out of the figures unless ``--all-runs`` (then marked)."""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from runner.bundle.open import open_results
from runner.cli.arguments.compare import PLOT_NAME
from runner.errors import UserError
from runner.results.layout import entry_runs
from runner.terminal import json_text, markup


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


def judged(paths: list[Path], trusted_keys: str | None, all_runs: bool) -> tuple[list[Path], list]:
    """(the runs to compare, [(a run left out, its verdict)]): a run that does not verify is
    refused; one that does not count is left out unless ``all_runs``."""
    from runner.keys.trust import trusted_keys as trusted_keys_of  # lazy: start-up (with the verifier)
    from runner.verify.verdict import judge  # lazy: heavy (the verifier)

    keys = trusted_keys_of(trusted_keys)
    verdicts = [(path, judge(path, keys)) for path in paths]
    for path, verdict in verdicts:
        if not verdict.verified:
            raise UserError(f"{path} is not verified ({verdict.reason})",
                            "compare runs that `runner verify` verifies under the keys you trust (--trusted-keys)")
    kept = [p for p, v in verdicts if v.counts or all_runs]
    left_out = [(p, v) for p, v in verdicts if not v.counts and not all_runs]
    if not kept:
        raise UserError(f"none of the {len(paths)} runs counts ({left_out[0][1].reason})",
                        "compare runs that count, or pass --all-runs to compare them anyway (marked)")
    return kept, left_out


def run(args) -> int:
    from runner.compare import figures, summarise  # lazy: heavy (matplotlib and the verifier)
    from runner.compare.plot import plot_comparison  # lazy: heavy (matplotlib)
    from runner.compare.table import comparison_tables, tta_line  # lazy: start-up (with runner.compare)

    console = Console()
    given, left_out = judged(result_folders(args.results), args.trusted_keys, args.all_runs)
    with ExitStack() as stack:
        folders = open_results(given, stack)
        summaries = summarise([figures(folder) for folder in folders])
    # -o/--out DIR holds comparison.png; --plot FILE, the flag before it, names the file.
    plot_path = None if args.no_plot else (args.plot or args.out / PLOT_NAME)
    if args.json:
        plot = None if plot_path is None else str(plot_comparison(summaries, plot_path))
        print(json_text({"runs": [str(f) for f in given], "entries": [asdict(s) for s in summaries],
                          "left_out": [{"run": str(p), **v.to_dict()} for p, v in left_out],
                          "plot": plot}, indent=2))
        return 0
    for table in comparison_tables(summaries):
        console.print(table)
    for line in filter(None, map(tta_line, summaries)):
        console.print(line, highlight=False)
    for path, verdict in left_out:
        console.print(f"[yellow]left out[/]: {markup(path)}: does not count ({markup(verdict.reason)})",
                      highlight=False)
    if args.all_runs and any(s.smoke for s in summaries):
        console.print("[yellow]note[/]: smoke runs are pipeline checks on synthetic data, never benchmark figures")
    if plot_path is not None:
        console.print(f"plot: {plot_comparison(summaries, plot_path)}")
    return 0
