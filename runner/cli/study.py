"""``runner study KIND ENTRY``: DAWNBench's studies of the metric, each a folder of signed
runs with a JSON summary, PNG plots and report.html (see runner/study). The command parses
its flags into a request, ``runner.study.dispatch.run_study`` runs it, and the command
renders the study's tables."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from runner.options import ReproduceOptions
from runner.results.layout import short_id
from runner.slurm import options_from_args
from runner.study.dispatch import StudyRequest, run_study
from runner.study.generalization import TRANSFER_TRAIN_ITEMS, Choices
from runner.terminal import Column, compact_table


def run(args) -> int:
    console = Console()
    outcome = run_study(StudyRequest(
        kind=args.kind, entry=args.entry, runs=getattr(args, "runs", None),
        from_runs=getattr(args, "from_runs", None), thresholds=getattr(args, "thresholds", None),
        values=getattr(args, "values", None), batch_size=getattr(args, "batch_size", None),
        include_nonconforming=getattr(args, "include_non_conforming", False),
        generalization=Choices(
            extra_set=getattr(args, "extra_set", None), references=tuple(getattr(args, "reference", None) or ()),
            transfer=not getattr(args, "no_transfer", False), transfer_task=getattr(args, "transfer_task", None),
            transfer_items=getattr(args, "transfer_items", None) or TRANSFER_TRAIN_ITEMS),
        switches=getattr(args, "switches", None), processes=getattr(args, "processes", None),
        nodes=getattr(args, "nodes", None),
        options=ReproduceOptions(
            smoke=args.smoke, allow_hardware_mismatch=args.allow_hardware_mismatch, backends=args.backend,
            timeout_minutes=args.timeout_minutes, infer=not getattr(args, "no_infer", False),
            loadgen=not args.no_loadgen),
        slurm=options_from_args(args),
    ))
    out = outcome.output
    for table in out.tables:
        # the terminal's short run ids (the report and summary.json keep the full ones)
        rows = [[short_id(cell) if header == "run" else escape(cell) for header, cell in zip(table.headers, row)]
                for row in table.rows]
        console.print(compact_table(table.title, [Column(h, wrap=h != "run") for h in table.headers], rows,
                                    hide_empty=False))
    for note in out.notes:
        console.print(f"[dim]{note}[/]")
    console.print(f"study: {out.folder}\nreport: {outcome.report}")
    code = 0
    if outcome.failed:
        # The study is written either way; the exit status says not every run completed.
        console.print(f"[yellow]{len(outcome.failed)} of {outcome.runs} runs did not complete[/]: "
                      f"{', '.join(outcome.failed)}")
        code = 1
    if outcome.unstudied:
        console.print(f"[yellow]{len(outcome.unstudied)} of {outcome.runs} runs could not be studied[/] "
                      f"(the report says why): {', '.join(outcome.unstudied)}")
        code = 1
    return code
