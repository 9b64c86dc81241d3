"""Batch size: the entry run at each global batch size (its learning rate scaled by the
rule its manifest declares), plotting epochs to threshold, throughput and TTA against the
batch size: DAWNBench's first figure, where the best throughput and the best TTA came at
different batch sizes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING


from runner.errors import UserError
from runner.manifest import load_entry
from runner.study.readable import read_run
from runner.study.common import (
    SavedStudy, StudyOutput, Table, crossing_epoch, fmt, run_entry, save_study, throughput, with_runs,
)
from runner.study.plots import figure, save
from runner.report import reporter

if TYPE_CHECKING:
    from runner.study.dispatch import StudyRequest

KIND = "batch-size"


def parse_values(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise UserError(f"--values {text!r} is not a list of batch sizes",
                        "give positive integers separated by commas, e.g. --values 32,128,512,2048")
    return sorted(set(values))


def measure(folder: Path) -> dict:
    r = read_run(folder)
    return {
        "run_id": r.run_id, "seed": r.seed, "status": r.status,
        "global_batch_size": int(r.hyperparameters["global_batch_size"]),
        "lr": float(r.hyperparameters["lr"]),
        "reached": r.tta_seconds is not None,
        "tta_seconds": r.tta_seconds,
        "epochs_to_threshold": crossing_epoch(r),
        "samples_per_second": throughput(folder, r),
        "conforming": r.conforming,
    }


def analyse(folders: list[Path]) -> dict:
    first = read_run(folders[0])
    rows = sorted((measure(f) for f in folders), key=lambda m: m["global_batch_size"])
    return {"kind": KIND, "entry": first.entry.name, "task": first.task.id,
            "threshold": first.task.threshold, "runs": rows}


def plot(summary: dict, path: Path) -> str:
    fig, axes = figure(3)
    rows = summary["runs"]
    for ax, key, label in zip(axes, ("epochs_to_threshold", "samples_per_second", "tta_seconds"),
                              ("epochs to threshold", "throughput (samples/s)", "time to accuracy (s)")):
        points = [(r["global_batch_size"], r[key]) for r in rows if r[key] is not None]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o")
        missed = [r["global_batch_size"] for r in rows if r[key] is None]
        if missed:
            ax.scatter(missed, [0] * len(missed), marker="x", color="red", label="never reached")
            ax.legend(fontsize=7)
        ax.set_xscale("log", base=2)
        ax.set_xticks([r["global_batch_size"] for r in rows], [str(r["global_batch_size"]) for r in rows])
        ax.set_xlabel("global batch size")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
    return save(fig, path)


def present(saved: SavedStudy) -> StudyOutput:
    """Its row's report: the saved study's summary as its tables, plots and notes."""
    folder, summary = saved.folder, saved.summary
    rows = [[str(r["global_batch_size"]), f"{r['lr']:g}", r["run_id"], fmt(r["epochs_to_threshold"], "d", "never"),
             fmt(r["samples_per_second"], ",.0f"), fmt(r["tta_seconds"], ".2f", "never reached"),
             "yes" if r["conforming"] else "no"] for r in summary["runs"]]
    name = plot(summary, folder / "batch-size.png")
    return StudyOutput(
        KIND, summary["entry"], folder, summary,
        plots=[(name, "epochs to threshold, throughput and TTA against the global batch size")],
        tables=[Table("runs by batch size", ["batch", "lr", "run", "epochs to threshold", "samples/s",
                                             "TTA s", "conforming"], rows)],
        notes=["throughput = training-set size x epochs / time inside the epochs the entry marked "
               "(epoch_start..epoch_stop, host-stamped, frozen time excluded)"],
    )


def run(entry_path: str, values: list[int], opts, slurm=None) -> SavedStudy:
    entry = load_entry(entry_path)
    if entry.hyperparameters is None:
        raise UserError(f"entry {entry.name} declares no tunable hyperparameters",
                        "add a hyperparameters: section (global_batch_size, base_lr, lr_scaling) to its "
                        "entry.yaml and read RUNNER_HP_GLOBAL_BATCH_SIZE / RUNNER_HP_LR in its training code")
    folders = []
    for value in values:
        reporter().print(f"[bold]batch size[/] {value}: lr {entry.hyperparameters.lr_for(value):g} "
                      f"({entry.hyperparameters.lr_scaling} from {entry.hyperparameters.base_lr:g} "
                      f"at {entry.hyperparameters.default_batch_size})")
        chosen = replace(with_runs(opts, 1, seed=opts.seed),
                         hyperparameters=entry.hyperparameters.for_batch_size(value))
        folders += run_entry(entry_path, chosen, slurm)
    return study(folders)


def study(folders: list[Path]) -> SavedStudy:
    summary = analyse(folders)
    return save_study(KIND, folders, summary)


def new_runs(request: StudyRequest) -> SavedStudy:
    """Its row's run (runner.study.registry): one new run per batch size."""
    return run(request.entry, parse_values(request.arguments["values"]), request.options, slurm=request.slurm)
