"""Stability: N runs with seeds the runner draws; TTA per run, median, coefficient of
variation, the fraction that reached the threshold, and every run's accuracy-vs-time curve.
DAWNBench's analysis found CVs of a few percent for the top entries.

The median and CV are of the conforming runs only: a run that was contended, or that ran on
the wrong host, measures something else. The runs left out are named, with their reasons, in
the output and summary.json; ``--include-non-conforming`` counts them in (and says so). Smoke
runs are never conforming and are studied as the pipeline checks they are."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING


from runner import data
from runner.data.synthetic import smoke_data
from runner.errors import UserError
from runner.results import summarize_runs
from runner.results.record import Result
from runner.study.readable import read_run
from runner.study.common import (
    SavedStudy, StudyOutput, Table, fmt, left_out, read_curve, run_entry, save_study, with_runs,
)
from runner.study.plots import figure, save
from runner.tasks import get_task

if TYPE_CHECKING:
    from collections.abc import Callable

    from runner.study.dispatch import StudyRequest

KIND = "stability"


def _labels(result: Result):
    """The labels the runs were scored against (staged, or the smoke data made again);
    None when this host does not have the same data (or the run names none: it never started)."""
    if result.data is None:
        return None
    try:
        if result.smoke:
            with tempfile.TemporaryDirectory(prefix="runner-study-") as tmp:
                staged = smoke_data(result.task.id, Path(tmp))
                return staged.load_eval_labels() if staged.digest == result.data.digest else None
        staged = data.staged(result.task.id)
        return staged.load_eval_labels() if staged.digest == result.data.digest else None
    except (UserError, OSError, ValueError, AttributeError):
        return None


def analyse(folders: list[Path], include_nonconforming: bool = False) -> dict:
    from runner.score.across_runs import alike_runs  # lazy: start-up (runner --help)

    results = [read_run(f) for f in folders]
    labels = _labels(results[0])

    framework = (results[0].entry.framework or {}).get("name", "pytorch")
    alike = alike_runs(folders, labels, get_task(results[0].task.id), framework) if labels is not None else {}
    dropped = left_out(results, folders, alike)
    skip = set() if include_nonconforming else {d["run_id"] for d in dropped}
    s = summarize_runs([r.tta_seconds for r in results if r.run_id not in skip])
    return {
        "kind": KIND,
        "entry": results[0].entry.name,
        "task": results[0].task.id,
        "threshold": results[0].task.threshold,
        "runs": [
            {"run_id": r.run_id, "seed": r.seed, "status": r.status, "reached": r.tta_seconds is not None,
             "tta_seconds": r.tta_seconds, "conforming": r.conforming and not alike.get(f),
             "alike": alike.get(f, [])}
            for f, r in zip(folders, results)
        ],
        "alike_runs": sorted({reason for reasons in alike.values() for reason in reasons}),
        "alike_checked": labels is not None,  # the runs' data is on this host
        "non_conforming": dropped,  # each with its reasons
        "non_conforming_included": include_nonconforming,
        "counted_runs": s.runs,  # the runs the figures below are of
        "median_tta_seconds": s.median,
        "coefficient_of_variation": s.cv,
        "reached": s.reached,
        "fraction_reached": s.reached / s.runs if s.runs else 0.0,
    }


def plot_curves(folders: list[Path], threshold_percent: float, path: Path) -> str:
    fig, (ax,) = figure()
    for folder in folders:
        points = read_curve(folder)
        if points:
            ax.plot([p[1] for p in points], [p[2] for p in points], marker="o", ms=3,
                    label=read_run(folder).seed)
    ax.axhline(threshold_percent, color="grey", ls="--", lw=1, label="threshold")
    ax.set_xlim(left=0)  # the clock starts at the entry's process start
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("every run's accuracy against time")
    ax.legend(title="seed", fontsize=7)
    return save(fig, path)


def present(saved: SavedStudy) -> StudyOutput:
    """Its row's report: the saved study's summary as its tables, plots and notes."""
    folder, folders, summary = saved.folder, list(saved.runs), saved.summary
    rows = [[r["run_id"], str(r["seed"]), r["status"], "yes" if r["reached"] else "no",
             fmt(r["tta_seconds"], ".2f"), "yes" if r["conforming"] else "no"] for r in summary["runs"]]
    plot = plot_curves(folders, summary["threshold"] * 100, folder / "curves.png")
    counted = summary.get("counted_runs", len(summary["runs"]))
    stats = [[f"{counted} of {len(summary['runs'])}", f"{summary['fraction_reached']:.0%}",
              fmt(summary["median_tta_seconds"], ".2f"), fmt(summary["coefficient_of_variation"], ".3f")]]
    dropped = summary.get("non_conforming") or []
    verb = "counted in, as asked" if summary.get("non_conforming_included") else "left out of the median and CV"
    notes = [f"non-conforming {d['run_id']} ({verb}): {'; '.join(d['reasons'])}" for d in dropped]
    return StudyOutput(
        KIND, summary["entry"], folder, summary, notes=notes,
        plots=[(plot, "accuracy against training time, every run (threshold dashed)")],
        tables=[Table("runs", ["run", "seed", "status", "reached", "TTA s", "conforming"], rows),
                Table("summary", ["runs", "reached", "median TTA s", "CV"], stats)],
    )


def run(entry_path: str, runs: int, opts, slurm=None, include_nonconforming: bool = False) -> SavedStudy:
    # seed=None: the runner draws the seeds, as for any reproduction.
    folders = run_entry(entry_path, with_runs(opts, runs, seed=None), slurm)
    return study(folders, include_nonconforming)


def study(folders: list[Path], include_nonconforming: bool = False) -> SavedStudy:
    summary = analyse(folders, include_nonconforming)
    return save_study(KIND, folders, summary)


def new_runs(request: StudyRequest) -> SavedStudy:
    """Its row's run (runner.study.registry): N new runs."""
    return run(request.entry, request.new_runs, request.options, slurm=request.slurm,
               include_nonconforming=request.include_nonconforming)


def given_runs(request: StudyRequest, runs: Callable[[], list[Path]]) -> SavedStudy:
    """Its row's ``--from-runs`` reader."""
    return study(runs(), request.include_nonconforming)
