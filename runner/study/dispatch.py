"""Which study runs for a request of ``runner study KIND ENTRY``, and what it came to.

The command line parses its flags into a ``StudyRequest`` and renders the ``StudyOutcome``;
here a request runs by its row of ``runner.study.registry.STUDIES``: new runs (the row's
``run``) or runs already made (``--from-runs``: the row's reader, which reads the given runs
when it needs them) save the study, the row's ``report`` renders it, and the outcome says
whether every run of the study completed. No study is named here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from runner.errors import UserError
from runner.manifest import load_entry
from runner.options import ReproduceOptions
from runner.report import reporter
from runner.safe_read import visible
from runner.study.readable import read_run, readable_runs
from runner.study.common import RUNS_DIR, StudyOutput, check_run_folders, write_summary
from runner.study.registry import STUDIES, load
from runner.study.report import write_report

if TYPE_CHECKING:
    from runner.slurm import SlurmOptions


@dataclass(frozen=True)
class StudyRequest:
    """A study to run, as the user asked for it (``runner study``'s flags)."""

    kind: str  # a row of runner.study.registry.STUDIES
    entry: str  # the entry folder
    runs: int | None = None  # new runs to make (per variant: lesion, factors, scaling)
    from_runs: list[str] | None = None  # run folders already made, instead of new runs
    options: ReproduceOptions = ReproduceOptions()  # each new run's (the study sets runs, seeds, curves)
    slurm: SlurmOptions | None = None  # the runs as one Slurm job array each
    include_nonconforming: bool = False  # stability, lesion, factors: count non-conforming runs in the figures
    arguments: Mapping[str, Any] = field(default_factory=dict)  # the row's own options by dest (absent: default)

    @property
    def new_runs(self) -> int:
        """The new runs to make: ``--runs``, else the row's default, as ``runner study`` would
        parse it (a request built in code may leave ``runs`` out); 1 for a row without one."""
        if self.runs is not None:
            return self.runs
        row = STUDIES.get(self.kind)
        return row.runs if row is not None and row.runs is not None else 1


@dataclass(frozen=True)
class StudyOutcome:
    """A written study: its output (tables, notes, folder), its report, and the runs of it
    that did not complete (the study is written either way)."""

    output: StudyOutput
    report: Path
    runs: int
    failed: list[str]  # run ids
    unstudied: list[str] = field(default_factory=list)  # run ids the study could not measure (its summary says why)


def options(request: StudyRequest) -> ReproduceOptions:
    # Curves past the crossing: the rows that plot them or read a ladder from them ask for them.
    return replace(request.options, full_curve=STUDIES[request.kind].full_curve)


def _given_runs(request: StudyRequest, unreadable: list[dict]) -> list[Path]:
    """The run folders of ``--from-runs`` that can be read; each other one is added to
    ``unreadable`` with why (one line), and the study goes on with the rest."""
    given = [Path(f) for f in request.from_runs or []]
    check_run_folders([f for f in given if not os.path.lexists(f / "result.json")])
    folders, left = readable_runs(given)
    for run in left:
        reporter().print(f"[yellow]unreadable run[/] {escape(run['problem'])}: left out of the study")
    unreadable.extend(left)
    if not folders:
        raise UserError(f"none of the {len(left)} runs given can be read ({left[0]['problem']})"
                        + (f", and {len(left) - 1} more" if len(left) > 1 else ""),
                        "pass run folders made by `runner reproduce` whose result.json is intact")
    name = load_entry(request.entry).name
    for folder in folders:
        if (other := read_run(folder).entry.name) != name:
            raise UserError(f"{folder} is a run of {visible(other)}, not of {name}",
                            f"pass runs under results/{name}/")
    return folders


def _study(request: StudyRequest, unreadable: list[dict]) -> StudyOutput:
    """The request run by its row alone: its run or its ``--from-runs`` reader saves the study,
    and its report renders what was saved."""
    row = STUDIES.get(request.kind)
    if row is None:
        raise ValueError(f"unknown study {request.kind!r}; the studies are {', '.join(STUDIES)}")
    request = replace(request, options=options(request))
    if not request.from_runs:
        saved = load(row.run)(request)
    elif row.from_runs is None:
        raise ValueError(f"the {row.name} study reads no runs already made (its row has no --from-runs reader)")
    else:  # the reader reads the given runs when it needs them: its own arguments are checked first
        saved = load(row.from_runs)(request, partial(_given_runs, request, unreadable))
    return load(row.report)(saved)


def run_study(request: StudyRequest) -> StudyOutcome:
    """Run (or read) the study's runs, write its folder and report.html. A run that cannot be
    read is listed with why (in the notes and the outcome), never hides the others."""
    unreadable: list[dict] = []
    out = _study(request, unreadable)
    out.notes.extend(f"unreadable run {run['run_id']}: {run['problem']} (left out)" for run in unreadable)
    if unreadable:  # in summary.json too, beside the runs studied
        out.summary["unreadable_runs"] = unreadable
        write_summary(out.folder, out.summary)
    report = write_report(out)
    runs, failed = 0, []
    for link in sorted((out.folder / RUNS_DIR).iterdir()):
        runs += 1
        try:
            run = read_run(link)
        except UserError:
            failed.append(link.name)
            continue
        if run.status != "complete":
            failed.append(run.run_id)
    unstudied = [r["run_id"] for r in out.summary.get("runs", []) if isinstance(r, dict) and r.get("problem")]
    unstudied += [run["run_id"] for run in unreadable]
    return StudyOutcome(out, report, runs + len(unreadable), failed, unstudied)
