"""Threshold sensitivity: TTA at a ladder of thresholds up to (and past) the task's, from
the runs' curves, plotted like DAWNBench's analysis of TTA against threshold.

Computed with the project's own TTA function: the runner's events give the timeline
(``runner.score.tta.timeline``), the result's scored evaluations say which meet each
threshold, and ``time_to_accuracy`` does the rest, so at the task's own threshold it
agrees exactly with the result's TTA.
"""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any


from runner.errors import UserError
from runner.events import read_events
from runner.score.tta import EventStreamError, time_to_accuracy, timeline
from runner.study.readable import read_run
from runner.study.common import (
    SavedStudy, StudyOutput, Table, fmt, run_entry, save_study, with_runs,
)
from runner.study.plots import figure, save
from runner.tasks import TASKS, get_task

if TYPE_CHECKING:
    from collections.abc import Callable

    from runner.study.dispatch import StudyRequest

KIND = "threshold"

# Percent, ending at (or past) each task's threshold: DAWNBench's ladders (``threshold_ladder``).
DEFAULT_LADDERS = {t.id: list(t.threshold_ladder) for t in TASKS.values() if t.threshold_ladder}


def parse_thresholds(text: str | None) -> list[float] | None:
    """``--thresholds 98.5,99``: percentages in (0, 100]; None (the task's ladder) when not given."""
    if not text:
        return None
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(not 0 < v <= 100 for v in values):
        raise UserError(f"--thresholds {text!r} is not a list of percentages",
                        "give numbers in (0, 100] separated by commas, e.g. --thresholds 98.5,99,99.3,99.5")
    return values


def tta_at(folder: Path, threshold: float) -> tuple[float | None, int | None, int | None]:
    """(TTA seconds, evaluation index, epoch) of the first evaluation scoring at or above
    ``threshold`` (a fraction); Nones when no evaluation reaches it."""
    result = read_run(folder)
    task = dataclasses.replace(get_task(result.task.id), threshold=threshold)
    try:
        line = timeline(read_events(Path(folder) / "events.jsonl"))
    except (EventStreamError, OSError) as exc:
        raise UserError(f"{folder}: its events do not form a run ({exc})",
                        "use a complete run folder made by `runner reproduce`") from None
    evaluations = result.training.evaluations if result.training else []
    meets = []
    for ev in evaluations:
        score = ev["scores"].get(task.metric)
        meets.append(ev.get("problem") is None and score is not None and task.meets(score))
    tta = time_to_accuracy(line, meets)
    if not tta.reached or tta.crossing is None:  # a reached TTA names its crossing
        return None, None, None
    ev = evaluations[tta.crossing]
    return tta.seconds, tta.crossing, ev.get("epoch")


def analyse(folders: list[Path], ladder: list[float]) -> dict:
    results = [read_run(f) for f in folders]
    task = results[0].task
    if any(r.task.id != task.id for r in results):
        raise UserError("the runs are of different tasks", "pass runs of one entry")
    runs: list[dict[str, Any]] = []  # summary.json's, one per run
    for folder, r in zip(folders, results):
        points = []
        for pct in ladder:
            seconds, index, epoch = tta_at(folder, pct / 100)
            points.append({"threshold_percent": pct, "reached": seconds is not None,
                           "tta_seconds": seconds, "evaluation": index, "epoch": epoch})
        runs.append({"run_id": r.run_id, "seed": r.seed, "result_tta_seconds": r.tta_seconds,
                     "thresholds": points})
    medians = []
    for i, pct in enumerate(ladder):
        reached = [run["thresholds"][i]["tta_seconds"] for run in runs if run["thresholds"][i]["reached"]]
        medians.append({"threshold_percent": pct, "reached": len(reached), "runs": len(runs),
                        "median_tta_seconds": statistics.median(reached) if reached else None})
    return {"kind": KIND, "entry": results[0].entry.name, "task": task.id, "metric": task.metric,
            "task_threshold_percent": round(task.threshold * 100, 4), "ladder_percent": ladder,
            "runs": runs, "median": medians}


def plot(summary: dict, path: Path) -> str:
    fig, (ax,) = figure()
    ladder = summary["ladder_percent"]
    top = max([p["tta_seconds"] or 0 for r in summary["runs"] for p in r["thresholds"]] + [1]) * 1.15
    for run in summary["runs"]:
        xs = [p["threshold_percent"] for p in run["thresholds"] if p["reached"]]
        ys = [p["tta_seconds"] for p in run["thresholds"] if p["reached"]]
        ax.plot(xs, ys, marker="o", alpha=0.6, label=f"seed {run['seed']}")
        missed = [p["threshold_percent"] for p in run["thresholds"] if not p["reached"]]
        ax.scatter(missed, [top] * len(missed), marker="x", color="red", zorder=3)
    med = [m for m in summary["median"] if m["median_tta_seconds"] is not None]
    ax.plot([m["threshold_percent"] for m in med], [m["median_tta_seconds"] for m in med],
            color="black", lw=2, label="median")
    ax.axvline(summary["task_threshold_percent"], color="grey", ls="--", lw=1)
    ax.axhline(top, color="red", lw=0.5, ls=":")
    ax.text(ladder[0], top, " x: never reached", color="red", va="bottom", fontsize=8)
    ax.set_ylim(0, top * 1.08)
    ax.set_xticks(ladder)
    ax.set_xlabel(f"threshold ({summary['metric']}, %)")
    ax.set_ylabel("time to accuracy (s)")
    ax.set_title("TTA against threshold (task's threshold dashed)")
    ax.legend(fontsize=7)
    return save(fig, path)


def present(saved: SavedStudy) -> StudyOutput:
    """Its row's report: the saved study's summary as its tables, plots and notes."""
    folder, summary = saved.folder, saved.summary
    headers = ["run", *[f"{p:g}%" for p in summary["ladder_percent"]]]
    rows = [[f"{r['run_id']} (seed {r['seed']})",
             *[fmt(p["tta_seconds"], ".2f", "never reached") + (f" (epoch {p['epoch']})" if p["reached"] else "")
               for p in r["thresholds"]]] for r in summary["runs"]]
    rows.append(["median", *[fmt(m["median_tta_seconds"], ".2f", "never reached") + f" ({m['reached']}/{m['runs']})"
                             for m in summary["median"]]])
    name = plot(summary, folder / "tta-vs-threshold.png")
    return StudyOutput(KIND, summary["entry"], folder, summary,
                       plots=[(name, "TTA against threshold; x marks thresholds a run never reached")],
                       tables=[Table("TTA (s) at each threshold", headers, rows)])


def study(folders: list[Path], ladder: list[float] | None = None) -> SavedStudy:
    task_id = read_run(folders[0]).task.id
    ladder = sorted(ladder or DEFAULT_LADDERS[task_id])
    summary = analyse(folders, ladder)
    return save_study(KIND, folders, summary)


def run(entry_path: str, runs: int, opts, ladder: list[float] | None = None, slurm=None) -> SavedStudy:
    folders = run_entry(entry_path, with_runs(opts, runs, seed=None), slurm)
    return study(folders, ladder)


def new_runs(request: StudyRequest) -> SavedStudy:
    """Its row's run (runner.study.registry): the ladder, then new runs."""
    ladder = parse_thresholds(request.arguments.get("thresholds"))
    return run(request.entry, request.new_runs, request.options, ladder, slurm=request.slurm)


def given_runs(request: StudyRequest, runs: Callable[[], list[Path]]) -> SavedStudy:
    """Its row's ``--from-runs`` reader: the ladder, then the runs."""
    ladder = parse_thresholds(request.arguments.get("thresholds"))
    return study(runs(), ladder)
