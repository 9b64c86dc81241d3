"""``runner study KIND ENTRY``: DAWNBench's studies of the metric, each a folder of signed
runs with a JSON summary, PNG plots and report.html (see runner/study). The command parses
its flags into a request, ``runner.study.dispatch.run_study`` runs it, and the command
renders the study's tables."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table as RichTable

from runner.options import ReproduceOptions
from runner.slurm import options_from_args
from runner.study.dispatch import StudyRequest, run_study


def run(args) -> int:
    console = Console()
    outcome = run_study(StudyRequest(
        kind=args.kind, entry=args.entry, runs=getattr(args, "runs", None),
        from_runs=getattr(args, "from_runs", None), thresholds=getattr(args, "thresholds", None),
        values=getattr(args, "values", None), batch_size=getattr(args, "batch_size", None),
        include_nonconforming=getattr(args, "include_non_conforming", False),
        options=ReproduceOptions(
            smoke=args.smoke, allow_hardware_mismatch=args.allow_hardware_mismatch, backends=args.backend,
            timeout_minutes=args.timeout_minutes, infer=not getattr(args, "no_infer", False),
            loadgen=not args.no_loadgen),
        slurm=options_from_args(args),
    ))
    out = outcome.output
    for table in out.tables:
        shown = RichTable(title=table.title)
        for header in table.headers:
            shown.add_column(header)
        for row in table.rows:
            shown.add_row(*row)
        console.print(shown)
    for note in out.notes:
        console.print(f"[dim]{note}[/]")
    console.print(f"study: {out.folder}\nreport: {outcome.report}")
    if outcome.failed:
        # The study is written either way; the exit status says not every run completed.
        console.print(f"[yellow]{len(outcome.failed)} of {outcome.runs} runs did not complete[/]: "
                      f"{', '.join(outcome.failed)}")
        return 1
    return 0
