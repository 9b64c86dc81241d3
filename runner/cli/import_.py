"""``runner import dawnbench PATH``: published DAWNBench submissions -> claims under the
results folder (``claims/<task>/<kind>/<name>.json``), for the leaderboard."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner import paths
from runner.dawnbench import import_dawnbench, save_claim
from runner.errors import UserError


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
