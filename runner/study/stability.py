"""Stability: N runs with seeds the runner draws; TTA per run, median, coefficient of
variation, the fraction that reached the threshold, and every run's accuracy-vs-time curve.
DAWNBench's analysis found CVs of a few percent for the top entries."""

from __future__ import annotations

from pathlib import Path


from runner.results import summarize_runs
from runner.results.record import Result
from runner.study.common import (
    StudyOutput, Table, fmt, read_curve, run_entry, save_study, with_runs,
)
from runner.study.plots import figure, save

KIND = "stability"


def _labels(result: Result):
    """The labels the runs were scored against (staged, or the smoke data made again);
    None when this host does not have the same data."""
    import tempfile

    from runner import data
    from runner.data.synthetic import smoke_data
    from runner.errors import UserError

    try:
        if result.smoke:
            with tempfile.TemporaryDirectory(prefix="runner-study-") as tmp:
                staged = smoke_data(result.task.id, Path(tmp))
                return staged.load_eval_labels() if staged.digest == result.data.digest else None
        staged = data.staged(result.task.id)
        return staged.load_eval_labels() if staged.digest == result.data.digest else None
    except (UserError, OSError, ValueError, AttributeError):
        return None


def analyse(folders: list[Path]) -> dict:
    from runner.score.across_runs import alike_runs

    results = [Result.read(f) for f in folders]
    s = summarize_runs([r.tta_seconds for r in results])
    labels = _labels(results[0])
    alike = alike_runs(folders, labels) if labels is not None else {}  # the same network across seeds
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
        "median_tta_seconds": s.median,
        "coefficient_of_variation": s.cv,
        "reached": s.reached,
        "fraction_reached": s.reached / s.runs,
    }


def plot_curves(folders: list[Path], threshold_percent: float, path: Path) -> str:
    fig, (ax,) = figure()
    for folder in folders:
        points = read_curve(folder)
        if points:
            ax.plot([p[1] for p in points], [p[2] for p in points], marker="o", ms=3,
                    label=Result.read(folder).seed)
    ax.axhline(threshold_percent, color="grey", ls="--", lw=1, label="threshold")
    ax.set_xlim(left=0)  # the clock starts at the entry's process start
    ax.set_xlabel("training time (s)")
    ax.set_ylabel("accuracy (%)")
    ax.set_title("every run's accuracy against time")
    ax.legend(title="seed", fontsize=7)
    return save(fig, path)


def present(folder: Path, folders: list[Path], summary: dict) -> StudyOutput:
    rows = [[r["run_id"], str(r["seed"]), r["status"], "yes" if r["reached"] else "no",
             fmt(r["tta_seconds"], ".2f"), "yes" if r["conforming"] else "no"] for r in summary["runs"]]
    plot = plot_curves(folders, summary["threshold"] * 100, folder / "curves.png")
    stats = [[str(len(summary["runs"])), f"{summary['fraction_reached']:.0%}",
              fmt(summary["median_tta_seconds"], ".2f"), fmt(summary["coefficient_of_variation"], ".3f")]]
    return StudyOutput(
        KIND, summary["entry"], folder, summary,
        plots=[(plot, "accuracy against training time, every run (threshold dashed)")],
        tables=[Table("runs", ["run", "seed", "status", "reached", "TTA s", "conforming"], rows),
                Table("summary", ["runs", "reached", "median TTA s", "CV"], stats)],
    )


def run(entry_path: str, runs: int, opts, slurm=None) -> StudyOutput:
    # seed=None: the runner draws the seeds, as for any reproduction.
    folders = run_entry(entry_path, with_runs(opts, runs, seed=None), slurm)
    return study(folders)


def study(folders: list[Path]) -> StudyOutput:
    summary = analyse(folders)
    folder = save_study(KIND, folders, summary)
    return present(folder, folders, summary)
