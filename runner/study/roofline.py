"""Hardware use: achieved FLOP/s in training and batch-1 inference against the profile's
peak, on a roofline. DAWNBench's analysis found entries far below peak (10x on ImageNet GPUs).

FLOPs come from counting the entry's own model inside a container of the entry's own image
(``runner.study.flops``, ``python3 -m harness flops``): no entry code runs on the host, and the
counts are the entry's figures, parsed with bounds. Times come from the signed run: training
FLOP/s = FLOPs per sample x training samples/s (the epochs the runner stamped), inference
FLOP/s = FLOPs per item / mean batch-1 latency per backend.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from runner import paths
from runner.engine import get_engine
from runner.errors import UserError
from runner.profiles import load_profile
from runner.results.record import Result
from runner.manifest.untrusted_yaml import load_untrusted_yaml
from runner.safe_read import visible
from runner.study.readable import read_run
from runner.study.common import (
    SavedStudy, StudyOutput, Table, crossing_epoch, fmt, run_entry, save_study, throughput, train_set_size,
    with_runs,
)
from runner.study.flops import count_in_container, run_image
from runner.study.plots import figure, save
from runner.tasks import get_task

if TYPE_CHECKING:
    from collections.abc import Callable

    from runner.study.dispatch import StudyRequest

KIND = "roofline"


def _batch_size(result: Result, manifest: dict, override: int | None) -> int:
    if override:
        return override
    if "global_batch_size" in result.hyperparameters:
        return int(result.hyperparameters["global_batch_size"])
    declared = (manifest.get("hyperparameters") or {}).get("global_batch_size")
    if declared:
        try:
            return int(declared["default"])
        except (KeyError, TypeError, ValueError, AttributeError):
            raise UserError(f"{result.entry.name}'s entry.yaml declares global_batch_size without a whole default",
                            "pass --batch-size N (the entry's batch size)") from None
    raise UserError(f"{result.entry.name} declares no global batch size, so a training step's size is unknown",
                    "pass --batch-size N (the entry's batch size) or declare hyperparameters: in its entry.yaml")


def count_log(entry_name: str) -> Path:
    """The counting container's output (the entry's, so untrusted), kept for the last count."""
    return paths.home() / "logs" / f"flops-{entry_name}.log"


def analyse(folder: Path, batch_override: int | None = None) -> dict:
    result = read_run(folder)
    task = get_task(result.task.id)
    if task.input_shape is None or task.num_classes is None:
        raise UserError(f"the roofline study counts image classifiers; {task.id} has no image input or no classes",
                        "run it on an image classification task's entry")
    if result.image is None or result.cost is None:
        raise UserError(f"{visible(str(folder))} is the record of a run that never started (it names no image or "
                        "hardware profile)", "pass a run folder made by `runner reproduce` whose training ran")
    entry_dir = folder / "entry"  # the entry files the run used, signed with it (read, never imported)
    manifest = load_untrusted_yaml(entry_dir / "entry.yaml")  # bounded, no aliases, a regular file only
    if not isinstance(manifest, dict):
        raise UserError(f"{visible(str(entry_dir / 'entry.yaml'))} is not an entry manifest (not a mapping)",
                        "pass a run folder made by `runner reproduce`")
    batch = _batch_size(result, manifest, batch_override)
    profile = load_profile(result.cost.profile)
    if profile.peak is None:
        raise UserError(f"hardware profile {profile.id} has no peak figures",
                        f"add peak: (tflops, memory_bandwidth_gbs, source) to hardware_profiles/{profile.id}.yaml")
    engine = get_engine()
    image = run_image(engine, folder, result.entry.name, result.image.id, result.image.tag, result.smoke)
    log = count_log(result.entry.name)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    limits = profile.container_limits
    counted = count_in_container(
        engine, image, builder=manifest["inference"]["builder"],
        framework=(manifest.get("framework") or {}).get("name", "pytorch"),
        input_shape=task.input_shape, num_classes=task.num_classes, batch=batch,
        cpus=limits.cpus if limits else None, memory=limits.memory if limits else None, log_path=log,
    )
    step, item = counted["train_step"], counted["inference_item"]
    per_sample = step["flops"] / batch
    samples_per_s = throughput(folder, result)
    train_flops = per_sample * samples_per_s if samples_per_s else None
    size, epoch = train_set_size(result), crossing_epoch(result)
    to_threshold = (per_sample * size * epoch / result.tta_seconds
                    if size and epoch and result.tta_seconds else None)
    points = [{"name": "training", "arithmetic_intensity": step["flops"] / step["bytes"],
               "flops_per_second": train_flops, "flops_per_second_to_threshold": to_threshold}]
    for backend, record in sorted(result.inference.items()):
        mean_ms = record.mean_ms
        points.append({"name": f"inference {backend}", "arithmetic_intensity": item["flops"] / item["bytes"],
                       "flops_per_second": item["flops"] / (mean_ms / 1000) if mean_ms else None,
                       "latency_ms_mean": mean_ms})
    peaks = {p: t * 1e12 for p, t in profile.peak.tflops.items()}
    for point in points:
        achieved = point["flops_per_second"]
        point["fraction_of_peak"] = {p: achieved / v if achieved else None for p, v in peaks.items()}
    return {
        "kind": KIND, "entry": result.entry.name, "run_id": result.run_id, "task": task.id,
        "profile": profile.id, "smoke": result.smoke,
        "peak": {"flops_per_second": peaks, "memory_bandwidth_bytes_per_second": profile.peak.memory_bandwidth_gbs * 1e9,
                 "source": profile.peak.source},
        "counted": counted, "train_flops_per_sample": per_sample, "train_samples_per_second": samples_per_s,
        "points": points,
    }


def plot(summary: dict, path: Path) -> str:
    fig, (ax,) = figure(width=8)  # room for the legend beside the plot
    bandwidth = summary["peak"]["memory_bandwidth_bytes_per_second"]
    intensities = [p["arithmetic_intensity"] for p in summary["points"]]
    x = np.logspace(np.log10(min(intensities) / 10), np.log10(max(intensities) * 10), 200)
    for precision, peak in sorted(summary["peak"]["flops_per_second"].items(), key=lambda kv: kv[1]):
        ax.plot(x, np.minimum(peak, bandwidth * x), lw=1.5, label=f"roof {precision} ({peak / 1e9:,.0f} GFLOP/s)")
    for point, marker in zip(summary["points"], "osD^v<>"):
        if point["flops_per_second"]:
            ax.scatter([point["arithmetic_intensity"]], [point["flops_per_second"]], marker=marker, s=50,
                       zorder=3, label=f"{point['name']} ({point['flops_per_second'] / 1e9:,.1f} GFLOP/s)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(f"roofline: {summary['entry']} on {summary['profile']}")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1))
    return save(fig, path)


def present(saved: SavedStudy) -> StudyOutput:
    """Its row's report: the saved study's summary as its tables, plots and notes."""
    folder, summary = saved.folder, saved.summary
    precisions = sorted(summary["peak"]["flops_per_second"])
    rows = []
    for p in summary["points"]:
        rows.append([p["name"], f"{p['arithmetic_intensity']:.1f}", fmt(p["flops_per_second"] and p["flops_per_second"] / 1e9, ",.2f"),
                     *[fmt(p["fraction_of_peak"][k], ".1%") for k in precisions]])
    counted = summary["counted"]
    counts = [[f"training step (batch {counted['batch_size']})", f"{counted['train_step']['flops']:,}",
               f"{counted['train_step']['bytes']:,}"],
              ["inference, one item", f"{counted['inference_item']['flops']:,}", f"{counted['inference_item']['bytes']:,}"]]
    name = plot(summary, folder / "roofline.png")
    return StudyOutput(
        KIND, summary["entry"], folder, summary,
        plots=[(name, "roofline of the profile's peak with the run's achieved FLOP/s")],
        tables=[Table("achieved against peak", ["phase", "FLOP/byte", "GFLOP/s", *[f"% of {k} peak" for k in precisions]], rows),
                Table(f"counted by {counted['counted_by']} (torch.utils.flop_counter, torch {counted['torch']})",
                      ["what", "FLOPs", "bytes touched"], counts)],
        notes=[f"peak: {summary['peak']['source']}",
               f"FLOPs and bytes are counted by {counted['counted_by']} ({counted['image']['id'][:19]}"
               + (", not the run's own: its entry files built again" if counted["image"]["rebuilt"] else "")
               + "): the entry's builder and torch run in a locked-down container, so the counts are the "
               "entry's figures (checked only as finite, non-negative and bounded); the times are the runner's",
               "FLOPs count matrix products and convolutions only; bytes are every tensor each op reads and writes "
               "(no cache reuse), so arithmetic intensity is a lower bound"]
              + (["a smoke run: synthetic data and a truncated epoch, so the figures are nominal"] if summary["smoke"] else []),
    )


def study(folder: Path, batch_override: int | None = None) -> SavedStudy:
    summary = analyse(folder, batch_override)
    saved = save_study(KIND, [folder], summary)
    log = count_log(summary["entry"])
    if log.is_file():
        shutil.copyfile(log, saved.folder / "flops.log")
    return saved


def run(entry_path: str, opts, batch_override: int | None = None, slurm=None) -> SavedStudy:
    (folder,) = run_entry(entry_path, with_runs(opts, 1, seed=None, infer=True), slurm)
    return study(folder, batch_override)


def new_runs(request: StudyRequest) -> SavedStudy:
    """Its row's run (runner.study.registry): one new run, counted."""
    return run(request.entry, request.options, request.arguments.get("batch_size"), slurm=request.slurm)


def given_runs(request: StudyRequest, runs: Callable[[], list[Path]]) -> SavedStudy:
    """Its row's ``--from-runs`` reader: one run, counted."""
    if request.from_runs and len(request.from_runs) != 1:
        raise UserError("the roofline study reads one run", "pass one run folder to --from-runs")
    return study(runs()[0], request.arguments.get("batch_size"))
