"""``runner drift [BUNDLE ...]``: rebuild archived entries and report what changed."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from runner.drift import archived_bundles, check_drift
from runner.errors import UserError
from runner.options import ReproduceOptions
from runner.plan import LOCAL, SLURM, make_plan
from runner.report import Reporter, reporting
from runner.reproduce import launch
from runner.slurm import options_from_args
from runner.terminal import json_text


def _rerun(slurm):
    """One run of the entry with the archived seed, no inference: what drift compares.
    With ``slurm`` (a ``runner.slurm.SlurmOptions``) it runs as a Slurm job."""
    def rerun(entry: Path, seed: int, smoke: bool) -> Path:
        opts = ReproduceOptions(runs=1, seed=seed, smoke=smoke, infer=False)
        plan = make_plan(entry, opts, SLURM if slurm is not None else LOCAL)
        (folder,) = launch(plan, slurm, resume=False)
        return folder

    return rerun


def run(args) -> int:
    console = Console()
    bundles = [Path(b) for b in args.bundles] or archived_bundles()
    if not bundles:
        raise UserError("no archived bundles to check", "pass a bundle, or archive one under results/archive/")
    drifted, found = 0, []
    for bundle in bundles:
        # with --json, stdout is the JSON's alone: a rerun's progress goes to stderr
        with reporting(Reporter(Console(stderr=True))) if args.json else nullcontext():
            drift = check_drift(bundle, Path(args.entry) if args.entry else None,
                                rerun=_rerun(options_from_args(args)) if args.rerun else None,
                                tolerance=args.tolerance)
        drifted += drift.drifted
        if args.json:
            found.append({**asdict(drift), "drifted": drift.drifted})
            continue
        verdict = "[yellow]drift[/]" if drift.drifted else "[green]no drift[/]"
        console.print(f"{verdict} {drift.entry} ({bundle})")
        for change in drift.changes:
            console.print(f"  - {change}")
        for note in drift.notes:
            console.print(f"  [dim]{note}[/]")
        if drift.tta_now is not None:
            console.print(f"  TTA now {drift.tta_now:.2f} s, archived {drift.tta_archived:.2f} s")
    if args.json:
        print(json_text({"bundles": found}, indent=2))
    return 1 if drifted and args.fail_on_drift else 0
