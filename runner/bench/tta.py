"""Time-to-accuracy of an entry: median over seeds, the runner's own overhead, and the
same training run on the host versus inside the container.

- TTA: ``reproduce`` with N runs (seeds seed..seed+N-1), inference skipped.
- Overhead (warm image cache): a one-run ``reproduce`` timed end to end, minus the
  training container's own wall time. Target: under 3 s.
- Host vs container: the entry's train command run directly on this host against the same
  staged data, its events stamped and scored exactly as in the container. Target: the
  container at 97% of the host's speed or better (host TTA / container TTA >= 0.97).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from runner import data
from runner.manifest import load_entry
from runner.reproduce import ReproduceOptions, reproduce, summarize
from runner.run.events import parse_line
from runner.score.evaluations import score_evaluations
from runner.score.tta import time_to_accuracy, timeline

HELP = "TTA (median of N), the runner's overhead, and host-vs-container training speed"
OVERHEAD_TARGET_S = 3.0
CONTAINER_SPEED_TARGET = 0.97


def register(parser) -> None:
    parser.add_argument("entry", nargs="?", default="entries/mnist-cnn-cpu")
    parser.add_argument("--runs", type=int, default=3, help="runs for the TTA median (default 3)")
    parser.add_argument("--pairs", type=int, default=2,
                        help="host/container pairs for the speed comparison (default 2)")


def host_tta(entry, staged, seed: int, threads: int) -> float | None:
    """Run the entry's train command on the host with the harness' clock and scoring."""
    with tempfile.TemporaryDirectory(prefix="runner-bench-") as out:
        command = [sys.executable if c in ("python3", "python") else c for c in entry.train.command]
        command = [str(entry.path / c[len("/entry/"):]) if c.startswith("/entry/") else c
                   for c in command]
        env = {**os.environ, "RUNNER_DATA": str(staged.root), "RUNNER_OUTPUT": out,
               "RUNNER_SEED": str(seed), "RUNNER_THREADS": str(threads),
               "RUNNER_TASK": entry.task.id, "RUNNER_THRESHOLD": repr(entry.task.threshold),
               "RUNNER_SMOKE": "0"}
        t0 = time.monotonic()
        proc = subprocess.Popen(command, cwd=entry.path, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        events = []
        for line in proc.stdout:
            ev = parse_line(line, len(events), time.monotonic() - t0)
            if ev is not None:
                events.append(ev)
        proc.wait()
        line = timeline(events)
        scored = score_evaluations(entry.task, line, Path(out), staged.load_eval_labels())
        return time_to_accuracy(line, [s.meets for s in scored]).seconds


def container_run(entry_path: str, seed: int, console: Console) -> tuple[float | None, float, float]:
    """(TTA, total reproduce wall time, training container wall time) for one run."""
    started = time.monotonic()
    (folder,) = reproduce(entry_path, ReproduceOptions(runs=1, seed=seed, infer=False), console)
    total = time.monotonic() - started
    training = json.loads((folder / "result.json").read_text())["training"]
    tta = training.get("tta_seconds") if training.get("reached") else None
    return tta, total, training["wall_seconds"]


def run(args) -> int:
    console = Console()
    quiet = Console(file=open(os.devnull, "w"))
    entry = load_entry(args.entry)
    with console.status("warming the image cache (and staging the data if needed)"):
        reproduce(args.entry, ReproduceOptions(runs=1, infer=False), quiet)
    staged = data.staged(entry.task.id)

    with console.status(f"TTA: {args.runs} runs"):
        folders = reproduce(args.entry, ReproduceOptions(runs=args.runs, infer=False), quiet)
    summary = summarize(folders)

    overheads, pairs = [], []
    for i in range(args.pairs):
        with console.status(f"host vs container: pair {i + 1}/{args.pairs}"):
            c_tta, total, wall = container_run(args.entry, entry.seed + i, quiet)
            h_tta = host_tta(entry, staged, entry.seed + i, threads=os.cpu_count() or 1)
        overheads.append(total - wall)
        if c_tta and h_tta:
            pairs.append((h_tta, c_tta))

    table = Table(title=f"runner bench tta: {entry.name}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("target")
    fmt = lambda v, spec=".2f": "--" if v is None else format(v, spec)  # noqa: E731
    table.add_row(f"TTA per run (s), seeds {entry.seed}..",
                  ", ".join(fmt(t) for t in summary.ttas), "")
    table.add_row(f"TTA median of {summary.runs} (s)", fmt(summary.median), "< 10 s")
    table.add_row("runs reaching the threshold", f"{summary.reached}/{summary.runs}", "all")
    table.add_row("coefficient of variation", fmt(summary.cv, ".3f"), "")
    overhead = statistics.median(overheads)
    table.add_row("runner overhead, warm cache (s)", fmt(overhead),
                  f"< {OVERHEAD_TARGET_S:g} s")
    if pairs:
        host = statistics.median(h for h, _ in pairs)
        cont = statistics.median(c for _, c in pairs)
        table.add_row("host TTA, median (s)", fmt(host), "")
        table.add_row("container TTA, median (s)", fmt(cont), "")
        table.add_row("container speed / host speed", fmt(host / cont, ".3f"),
                      f">= {CONTAINER_SPEED_TARGET}")
    console.print(table)
    return 0

