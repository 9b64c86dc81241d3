"""Which study runs for a request of ``runner study KIND ENTRY``, and what it came to.

The command line parses its flags into a ``StudyRequest`` and renders the ``StudyOutcome``;
here are the choices between the studies: the reproduction options each needs, new runs or
runs already made (``--from-runs``), and whether every run of the study completed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.markup import escape

from runner.errors import UserError
from runner.manifest import load_entry
from runner.options import ReproduceOptions
from runner.report import reporter
from runner.safe_read import visible
from runner.study.readable import read_run, readable_runs
from runner.study import KINDS, batch_size, generalization, lesion, roofline, scaling, stability, threshold
from runner.study.common import RUNS_DIR, StudyOutput, check_run_folders, write_summary
from runner.study.report import write_report


@dataclass(frozen=True)
class StudyRequest:
    """A study to run, as the user asked for it (``runner study``'s flags)."""

    kind: str  # one of runner.study.KINDS
    entry: str  # the entry folder
    runs: int | None = None  # new runs to make (stability, threshold; per variant: lesion, factors, scaling)
    from_runs: list[str] | None = None  # run folders already made, instead of new runs
    thresholds: str | None = None  # threshold: percentages, comma-separated (None: the task's ladder)
    values: str | None = None  # batch-size: the batch sizes, comma-separated
    batch_size: int | None = None  # roofline: the run's global batch size (None: the manifest's)
    options: ReproduceOptions = ReproduceOptions()  # each new run's (the study sets runs, seeds, curves)
    slurm: object = None  # runner.slurm.SlurmOptions: the runs as one Slurm job array each
    include_nonconforming: bool = False  # stability, lesion, factors: count non-conforming runs in the figures
    generalization: generalization.Choices = generalization.Choices()  # the second test set, references, transfer
    switches: str | None = None  # lesion, factors: the declared switches to study, comma-separated (None: all)
    processes: str | None = None  # scaling: processes on one host, comma-separated
    nodes: str | None = None  # scaling: Slurm nodes (one process each), comma-separated


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
    # Curves past the crossing: stability plots them, the threshold ladder reads them.
    return replace(request.options, full_curve=request.kind in ("stability", "threshold"))


def _given_runs(request: StudyRequest, unreadable: list[dict]) -> list[Path]:
    """The run folders of ``--from-runs`` that can be read; each other one is added to
    ``unreadable`` with why (one line), and the study goes on with the rest."""
    check_run_folders([f for f in request.from_runs if not os.path.lexists(Path(f) / "result.json")])
    folders, left = readable_runs([Path(f) for f in request.from_runs])
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
    opts = options(request)
    if request.kind == "stability":
        include = request.include_nonconforming
        return (stability.study(_given_runs(request, unreadable), include) if request.from_runs
                else stability.run(request.entry, request.runs, opts, slurm=request.slurm,
                                   include_nonconforming=include))
    if request.kind == "threshold":
        ladder = threshold.parse_thresholds(request.thresholds)
        return (threshold.study(_given_runs(request, unreadable), ladder) if request.from_runs
                else threshold.run(request.entry, request.runs, opts, ladder, slurm=request.slurm))
    if request.kind == "generalization":
        return (generalization.study(_given_runs(request, unreadable), request.generalization) if request.from_runs
                else generalization.run(request.entry, request.runs or 1, opts, request.generalization,
                                        slurm=request.slurm))
    if request.kind == "batch-size":
        return batch_size.run(request.entry, batch_size.parse_values(request.values), opts, slurm=request.slurm)
    if request.kind in lesion.MODES:
        names, include = lesion.parse_names(request.switches), request.include_nonconforming
        return (lesion.from_runs(request.kind, request.entry, _given_runs(request, unreadable), names, include)
                if request.from_runs else
                lesion.run(request.kind, request.entry, request.runs, opts, names, request.slurm, include))
    if request.kind == "scaling":
        return (scaling.study(load_entry(request.entry), _given_runs(request, unreadable)) if request.from_runs
                else scaling.run(request.entry, scaling.parse_counts(request.processes, "--processes"),
                                 scaling.parse_counts(request.nodes, "--nodes"), request.runs, opts, request.slurm))
    if request.kind != "roofline":
        raise ValueError(f"unknown study {request.kind!r}; the studies are {', '.join(KINDS)}")
    if request.from_runs and len(request.from_runs) != 1:
        raise UserError("the roofline study reads one run", "pass one run folder to --from-runs")
    return (roofline.study(_given_runs(request, unreadable)[0], request.batch_size) if request.from_runs
            else roofline.run(request.entry, opts, request.batch_size, slurm=request.slurm))


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
