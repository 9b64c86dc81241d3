"""Does training scale: TTA and time per epoch against the number of training processes.

Two series, each on the placements ``runner reproduce`` already has: 1, 2, 4 ... processes
on one host (one container per rank, ``processes_per_node``), and 1, 2 ... Slurm nodes with
one process each (``nodes``: one job over that many nodes, ``--slurm``). The study sets the
placement for its runs (``ReproduceOptions.nodes`` / ``processes_per_node``); a placement
other than the manifest's is recorded as the run's ``variant``, so the leaderboard and the
claims leave it out. Against the series' one-process point: the speed-up of TTA and of the
time per epoch, and the efficiency (speed-up / processes). DAWNBench found an AmoebaNet on a
TPU pod scaling poorly and a ResNet-50 on a DGX-1 well.

Time per epoch is the runner's (the entry's ``epoch_start``..``epoch_stop``, host-stamped,
frozen time excluded); communication time is the entry's own figure where it logs one
(``communication_seconds`` per epoch, rank 0's time in collectives, its own clock: recorded,
never trusted, and reported as the entry's).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from runner.errors import UserError
from runner.events import ENTRY, read_events
from runner.manifest import Entry, load_entry
from runner.profiles import load_profile
from runner.report import reporter
from runner.results.record import Result
from runner.safe_read import open_file, visible
from runner.study.readable import read_run
from runner.study.common import SavedStudy, StudyOutput, Table, epoch_seconds, fmt, run_entry, save_study, with_runs
from runner.study.plots import figure, save

if TYPE_CHECKING:
    from collections.abc import Callable

    from runner.study.dispatch import StudyRequest

KIND = "scaling"
ONE_HOST, NODES = "processes on one host", "Slurm nodes, one process each"
COMM_KEY = "communication_seconds"  # the run contract's optional per-epoch event (docs/run-contract.md)


def parse_counts(text: str | None, flag: str) -> list[int] | None:
    """``--processes 1,2,4``: positive counts, sorted; the one-process point every speed-up
    is measured against is added when missing."""
    if text is None:
        return None
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(not 1 <= v <= 1024 for v in values):
        raise UserError(f"{flag} {text!r} is not a list of counts",
                        f"give whole numbers from 1 separated by commas, e.g. {flag} 1,2,4")
    return sorted(set(values) | {1})


def placements(processes: list[int], nodes: list[int] | None) -> list[tuple[int, int]]:
    """Each distinct (nodes, processes per node) to run: the one-host series, then the nodes'."""
    wanted = [(1, p) for p in processes] + [(n, 1) for n in nodes or []]
    return list(dict.fromkeys(wanted))


def placement_of(result: Result, entry: Entry) -> tuple[int, int]:
    """(nodes, processes per node) of a run: its variant's, else the manifest's."""
    variant = result.variant or {}
    return int(variant.get("nodes", entry.nodes)), int(variant.get("processes_per_node", entry.processes_per_node))


def communication(folder: Path) -> list[float]:
    """The entry's ``communication_seconds`` per epoch (finite, non-negative numbers only)."""
    values = []
    for ev in read_events(Path(folder) / "events.jsonl"):
        if ev.origin == ENTRY and ev.key == COMM_KEY:
            v = ev.value
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0:
                values.append(float(v))
    return values


def _median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def _timings(folder: Path) -> tuple[list[float], list[float], str | None]:
    """(epoch seconds, communication seconds, why they could not be read). A run whose Slurm
    task failed has no events.jsonl (a placeholder) or a broken one: it is reported as what
    it is, and the study goes on with the others."""
    try:
        open_file(Path(folder) / "events.jsonl", "events")[0].close()  # a regular file within its cap, or why not
        return epoch_seconds(folder), communication(folder), None
    except UserError as err:
        return [], [], err.problem
    except (OSError, ValueError, TypeError) as exc:
        why = "does not exist" if isinstance(exc, FileNotFoundError) else visible(str(exc))[:160]
        return [], [], f"{visible(str(Path(folder) / 'events.jsonl'))}: {why}"


def unreadable_run(folder: Path, problem: str) -> dict:
    """A run the study could not read at all, listed with why (it never hides the others)."""
    return {"run_id": Path(folder).name, "seed": None, "status": "unreadable", "nodes": None,
            "processes_per_node": None, "processes": None, "on_slurm": False, "reached": False, "tta_seconds": None,
            "epoch_seconds": [], "median_epoch_seconds": None, "communication_seconds": [],
            "median_communication_seconds": None, "conforming": False, "nonconforming_reasons": [], "smoke": False,
            "problem": problem}


def measure(folder: Path, entry: Entry) -> dict:
    try:
        r = read_run(folder)
    except UserError as err:
        return unreadable_run(folder, err.problem)
    nodes, per_node = placement_of(r, entry)
    epochs, comm, problem = _timings(folder)
    if r.status != "complete":
        failed = r.incomplete_reason or f"the run ended {r.status}"  # a Slurm task's: its job and state
        problem = None  # its events say nothing the study uses: the run is reported as failed
    else:
        failed = None
        # A complete run whose events cannot be read cannot be measured: it is not studied.
        problem = problem and f"its events cannot be read ({problem})"
    return {
        "run_id": r.run_id, "seed": r.seed, "status": r.status, "nodes": nodes, "processes_per_node": per_node,
        "processes": nodes * per_node, "on_slurm": r.slurm is not None,
        "reached": r.tta_seconds is not None, "tta_seconds": r.tta_seconds,
        "epoch_seconds": epochs, "median_epoch_seconds": _median(epochs),
        "communication_seconds": comm, "median_communication_seconds": _median(comm),
        "conforming": r.conforming, "nonconforming_reasons": list(r.nonconforming_reasons), "smoke": r.smoke,
        "failed": failed, **({"problem": problem} if problem else {}),
    }


def _point(runs: list[dict], count: int) -> dict:
    complete = [r for r in runs if r["status"] == "complete" and not r.get("problem")]
    ttas = [r["tta_seconds"] for r in complete if r["reached"]]
    epochs = [r["median_epoch_seconds"] for r in complete if r["median_epoch_seconds"] is not None]
    comm = [r["median_communication_seconds"] for r in complete if r["median_communication_seconds"] is not None]
    return {"processes": count, "run_ids": [r["run_id"] for r in runs], "complete_runs": len(complete),
            "conforming_runs": sum(1 for r in complete if r["conforming"]), "reached": len(ttas),
            "fraction_reached": len(ttas) / len(complete) if complete else None,
            "median_tta_seconds": _median(ttas), "median_epoch_seconds": _median(epochs),
            "median_communication_seconds": _median(comm)}


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def series(name: str, measured: list[dict]) -> dict | None:
    """One series: its points by process count, each with speed-up and efficiency against its
    own one-process point; None when it has no run."""
    if name == ONE_HOST:
        members = [m for m in measured if m["nodes"] == 1]
        count_of = "processes_per_node"
    else:
        members = [m for m in measured if m["processes_per_node"] == 1 and m["on_slurm"]]
        count_of = "nodes"
    counts = sorted({m[count_of] for m in members})
    if name == NODES and counts == [1]:
        return None  # the nodes' series is only there when some run spans nodes
    if not members:
        return None
    points = [_point([m for m in members if m[count_of] == c], c) for c in counts]
    base = next((p for p in points if p["processes"] == 1), None)
    base_tta = base["median_tta_seconds"] if base is not None else None
    base_epoch = base["median_epoch_seconds"] if base is not None else None
    for p in points:
        p["tta_speedup"] = _ratio(base_tta, p["median_tta_seconds"])
        p["epoch_speedup"] = _ratio(base_epoch, p["median_epoch_seconds"])
        p["tta_efficiency"] = _ratio(p["tta_speedup"], p["processes"])
        p["epoch_efficiency"] = _ratio(p["epoch_speedup"], p["processes"])
        p["communication_fraction"] = _ratio(p["median_communication_seconds"], p["median_epoch_seconds"])
    return {"name": name, "count": count_of, "points": points}


def analyse(entry: Entry, folders: list[Path]) -> dict:
    measured = [measure(f, entry) for f in folders]
    found = [s for s in (series(ONE_HOST, measured), series(NODES, measured)) if s is not None]
    if len(found) > 1:  # a series of its one-process point alone is only the other's baseline
        found = [s for s in found if len(s["points"]) > 1] or found
    return {"kind": KIND, "entry": entry.name, "task": entry.task.id, "threshold": entry.task.threshold,
            "declared": {"nodes": entry.nodes, "processes_per_node": entry.processes_per_node},
            "runs": measured, "series": found, "smoke": any(m["smoke"] for m in measured)}


def plot(summary: dict, path: Path) -> str:
    fig, axes = figure(2)
    top = max([p["processes"] for s in summary["series"] for p in s["points"]] + [2])
    for ax, key, label in zip(axes, ("tta_speedup", "epoch_speedup"), ("time to accuracy", "time per epoch")):
        ax.plot([1, top], [1, top], color="grey", ls="--", lw=1, label="ideal")
        for s, marker in zip(summary["series"], ("o", "s")):
            points = [p for p in s["points"] if p[key] is not None]
            ax.plot([p["processes"] for p in points], [p[key] for p in points], marker=marker, label=s["name"])
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ticks = sorted({p["processes"] for s in summary["series"] for p in s["points"]} | {1})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.yaxis.set_major_formatter(plain_numbers())
        ax.set_xlabel("training processes")
        ax.set_ylabel(f"speed-up of {label}")
        ax.set_title(f"{label}: speed-up against one process")
        ax.legend(fontsize=7)
    return save(fig, path)


def plain_numbers():
    from matplotlib.ticker import FuncFormatter  # lazy: heavy (matplotlib, only when a plot is drawn)

    return FuncFormatter(lambda value, _: f"{value:g}")


def present(saved: SavedStudy) -> StudyOutput:
    """Its row's report: the saved study's summary as its tables, plots and notes."""
    folder, summary = saved.folder, saved.summary
    tta_rows, epoch_rows = [], []
    for s in summary["series"]:
        for p in s["points"]:
            tta_rows.append([s["name"], str(p["processes"]), fmt(p["median_tta_seconds"], ".2f", "never reached"),
                             "--" if p["fraction_reached"] is None else f"{p['reached']}/{p['complete_runs']}",
                             f"{p.get('conforming_runs', '?')}/{p['complete_runs']}",
                             fmt(p["tta_speedup"], ".2f"), fmt(p["tta_efficiency"], ".0%")])
            epoch_rows.append([s["name"], str(p["processes"]), fmt(p["median_epoch_seconds"], ".2f"),
                               fmt(p["epoch_speedup"], ".2f"), fmt(p["epoch_efficiency"], ".0%"),
                               fmt(p["median_communication_seconds"], ".3f"), fmt(p["communication_fraction"], ".0%")])
    runs = [[r["run_id"], "?" if r["nodes"] is None else f"{r['nodes']} x {r['processes_per_node']}", "slurm" if r["on_slurm"] else "here",
             r["status"], fmt(r["tta_seconds"], ".2f", "never reached"), fmt(r["median_epoch_seconds"], ".2f"),
             "yes" if r["conforming"] else "no"] for r in summary["runs"]]
    name = plot(summary, folder / "scaling.png")
    notes = ["time per epoch: the runner's, the median of the epochs the entry marked (epoch_start..epoch_stop, "
             "host-stamped, frozen time excluded); communication: the entry's own communication_seconds per epoch "
             "(its clock, never trusted), where it logs them",
             "one process trains on the profile's cores (RUNNER_THREADS); each of several ranks on one core of its "
             "node (RUNNER_THREADS=1), as runner reproduce places them",
             "a placement other than the manifest's is a study variant (result.json variant): the leaderboard and "
             "the claims leave it out"]
    if not all(r["conforming"] for r in summary["runs"]):
        notes.append("the figures count every complete run, conforming or not (the conforming column says how many "
                     "conform): a placement of more nodes than the hardware profile describes is non-conforming, as "
                     "the profile's price covers its own nodes only")
    for r in summary["runs"]:
        if not r["conforming"] and r["nonconforming_reasons"]:
            notes.append(f"non-conforming {r['run_id']} ({r['nodes']} x {r['processes_per_node']}): "
                         + "; ".join(r["nonconforming_reasons"]))
    for r in summary["runs"]:
        if r.get("failed"):
            notes.append(f"failed {r['run_id']}: {r['failed']}")
        if r.get("problem"):
            notes.append(f"not studied {r['run_id']}: {r['problem']}")
    if summary.get("smoke"):
        notes.append("smoke runs: one short epoch on synthetic data; the figures check the pipeline, not the scaling")
    return StudyOutput(
        KIND, summary["entry"], folder, summary, notes=notes,
        plots=[(name, "speed-up of TTA and of time per epoch against one process (dashed: ideal)")],
        # Two tables of figures, each readable at 80 columns: speed-up and efficiency against one process.
        tables=[Table("scaling: time to accuracy", ["series", "processes", "median TTA s", "reached", "conforming",
                                                    "speed-up", "efficiency"], tta_rows),
                Table("scaling: time per epoch", ["series", "processes", "s / epoch", "speed-up", "efficiency",
                                                  "comm s / epoch", "comm share"], epoch_rows),
                Table("runs", ["run", "nodes x processes", "where", "status", "TTA s", "s / epoch", "conforming"],
                      runs)],
    )


def run(entry_path: str, processes: list[int] | None, nodes: list[int] | None, runs: int, opts,
        slurm=None) -> SavedStudy:
    if nodes and slurm is None:
        raise UserError("--nodes places runs across Slurm nodes", "add --slurm (and --partition P if needed)")
    if runs < 1:
        raise UserError(f"--runs {runs} is not a number of runs", "give at least 1")
    entry = load_entry(entry_path)
    profile_nodes = load_profile(entry.hardware_profile).nodes
    folders = []
    for n, p in placements(processes or [1, 2], nodes):
        mismatch = n != profile_nodes
        reporter().print(f"[bold]scaling[/] {n} node(s) x {p} process(es): {runs} run(s)"
                         + (f" (profile {entry.hardware_profile} has {profile_nodes} node(s): the runs are "
                            "non-conforming)" if mismatch else ""))
        chosen = replace(with_runs(opts, runs, seed=None), nodes=n, processes_per_node=p,
                         allow_hardware_mismatch=opts.allow_hardware_mismatch or mismatch)
        folders += run_entry(entry_path, chosen, slurm)
    return study(entry, folders)


def study(entry: Entry, folders: list[Path]) -> SavedStudy:
    summary = analyse(entry, folders)
    return save_study(KIND, folders, summary)


def new_runs(request: StudyRequest) -> SavedStudy:
    """Its row's run (runner.study.registry): the placements asked for, each run anew."""
    processes = parse_counts(request.arguments.get("processes"), "--processes")
    nodes = parse_counts(request.arguments.get("nodes"), "--nodes")
    return run(request.entry, processes, nodes, request.new_runs, request.options, request.slurm)


def given_runs(request: StudyRequest, runs: Callable[[], list[Path]]) -> SavedStudy:
    """Its row's ``--from-runs`` reader: each run placed by its own record."""
    entry = load_entry(request.entry)
    return study(entry, runs())
