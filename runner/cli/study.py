"""``runner study KIND ENTRY``: DAWNBench's studies of the metric, each a folder of signed
runs with a JSON summary, PNG plots and report.html (see runner/study). The command parses
its flags into a request (the options its row of ``runner.study.registry`` declares by name),
``runner.study.dispatch.run_study`` runs it, and the command renders the study's tables."""

from __future__ import annotations

import re
import textwrap

from rich.console import Console
from rich.markup import escape

from runner.options import ReproduceOptions
from runner.results.layout import short_id
from runner.slurm import options_from_args
from runner.study.dispatch import StudyRequest, run_study
from runner.study.registry import STUDIES
from runner.terminal import Column, compact_table


def run(args) -> int:
    console = Console()
    row = STUDIES[args.kind]
    outcome = run_study(StudyRequest(
        kind=args.kind, entry=args.entry, runs=getattr(args, "runs", None),
        from_runs=getattr(args, "from_runs", None),
        include_nonconforming=getattr(args, "include_non_conforming", False),
        arguments={arg.dest: getattr(args, arg.dest) for arg in row.arguments},
        options=ReproduceOptions(
            smoke=args.smoke, allow_hardware_mismatch=args.allow_hardware_mismatch, backends=args.backend,
            timeout_minutes=args.timeout_minutes, infer=not getattr(args, "no_infer", False),
            loadgen=not args.no_loadgen),
        slurm=options_from_args(args),
    ))
    out = outcome.output
    for table in study_tables(out):
        console.print(table)
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


def study_tables(out) -> list:
    """The study's tables for a terminal: short run ids (the report and summary.json keep the
    full ones), figures right-aligned and never wrapped, text wrapping within its column."""
    tables = []
    for table in out.tables:
        rows = [[short_id(cell) if header == "run" else escape(cell) for header, cell in zip(table.headers, row)]
                for row in table.rows]
        columns = []
        for i, header in enumerate(table.headers):
            cells = [row[i] for row in rows]
            if _numbers(cells):  # a figure never wraps; its header wraps to the figures' width instead
                width = max(len(str(c)) for c in cells)
                columns.append(Column(textwrap.fill(header, max(width, 4), break_long_words=False), number=True))
            else:
                columns.append(Column(header, wrap=header != "run", min_width=_longest_word(cells)))
        tables.append(compact_table(table.title, columns, rows, hide_empty=False))
    return tables


def _longest_word(cells: list[str], cap: int = 20) -> int | None:
    """A wrapping column is never narrower than its longest word (``label-smoothing`` stays whole)."""
    words = [len(w) for c in cells for w in str(c).split()]
    return min(max(words), cap) if words else None


_FIGURE = re.compile(r"--|[-+]?\d[\d.,]*(?:%|x|/\d+|-\d[\d.]*)?")


def _numbers(cells: list[str]) -> bool:
    """A column of figures (``20.52``, ``12.03-23.00``, ``3/3``, ``--``): right-aligned, never
    wrapped, as every other table of the runner shows numbers."""
    return bool(cells) and all(_FIGURE.fullmatch(str(c).strip()) for c in cells) and any(
        str(c).strip() != "--" for c in cells)
