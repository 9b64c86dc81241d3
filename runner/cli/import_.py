"""``runner import dawnbench PATH``: published DAWNBench submissions -> claims under the
results folder (``claims/<task>/<kind>/<name>.json``), for the leaderboard."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner import paths
from runner.dawnbench import import_dawnbench, save_claim
from runner.errors import UserError
from runner.tasks import TASKS


def run_dawnbench(args) -> int:
    results = Path(args.results) if args.results else paths.results_dir()
    report = import_dawnbench(Path(args.path), args.task)
    console = Console(highlight=False)
    for claim in report.claims:
        save_claim(results, claim)
        for note in claim.notes:
            console.print(f"[yellow]note[/]: {escape(claim.source)}: {escape(note)}")
    counts = ", ".join(f"{n} {kind}" for kind, n in sorted(report.read.items())) or "no files"
    console.print(f"read {counts}: {len(report.claims)} claims saved under {escape(str(results / 'claims'))}")
    for failure in report.failures:
        console.print(f"[red]failed[/]: {escape(str(failure))}")
    if report.failures:
        raise UserError(
            f"{len(report.failures)} file(s) could not be read (listed above); the {len(report.claims)} others were saved",
            "correct or remove those files and import again",
        )
    if not report.claims:
        raise UserError(f"no DAWNBench submission under {args.path}", "pass a submission JSON or a folder of them")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser("import", help="import claims from other benchmarks' formats",
                              description="Read another benchmark's published results into claims the leaderboard compares against.")
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    d = formats.add_parser(
        "dawnbench", help="DAWNBench submission files (train JSON + TSV, inference JSON)",
        description="Read DAWNBench submission files (a JSON file, or a folder walked recursively, laid out as "
        "stanford-futuredata/dawn-bench-entries) into claims under RESULTS/claims/.",
    )
    d.add_argument("path", help="a submission JSON (or its TSV), or a folder of them")
    d.add_argument("--task", choices=sorted(TASKS), help="the task of every file read (default: from its <Task>/ folder)")
    d.add_argument("--results", metavar="DIR", help="the results folder (default: the repository's results/)")
    d.set_defaults(func=run_dawnbench)
