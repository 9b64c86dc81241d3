"""Time-to-accuracy of an entry: median over seeds, the runner's own overhead, and the
same training run on the host versus inside the container.

- TTA: ``reproduce`` with N runs (seeds seed..seed+N-1), inference skipped.
- Overhead (warm image cache): a one-run ``reproduce`` timed end to end, minus the
  training container's own wall time. Target: under 3 s.
- Host vs container: the entry's train command run directly on this host against the same
  staged data, under the same rules: the clock starts at the process start, each
  ``eval_request`` stops the process (SIGSTOP, the host's freezer) while the harness
  evaluates the checkpoint in this process, and only that stopped time is excluded.
  Target: the container at 97% of the host's speed or better (host TTA / container TTA
  >= 0.97).
"""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

from runner import data
from runner.manifest import load_entry
from runner.report import quietly
from runner.reproduce import ReproduceOptions, reproduce, summarize
from runner.events import parse_line
from runner.score.evaluations import primary_score, score_predictions
from runner.score.tta import Evaluation, Timeline, time_to_accuracy

OVERHEAD_TARGET_S = 3.0
CONTAINER_SPEED_TARGET = 0.97


def _evaluate_on_host(entry, checkpoint: Path, images, labels) -> bool:
    """The evaluator's work, in this process: does ``checkpoint`` meet the threshold?"""
    from runner.harness.evaluate import predict  # lazy: start-up (runner --help)
    from runner.harness.model import load_model  # lazy: start-up (runner --help)

    loaded = load_model(entry.path, entry.inference.builder, checkpoint, entry.framework["name"])
    preds = predict(loaded, images, entry.task.topk)
    _, scores, _ = score_predictions(entry.task, preds, labels)
    value = primary_score(entry.task, scores)
    return value is not None and entry.task.meets(value)


def host_tta(entry, staged, seed: int, threads: int) -> float | None:
    """Run the entry's train command on the host under the runner's clock rules."""
    images = np.load(Path(staged.eval_dir) / "images.npy", mmap_mode="r")
    labels = staged.load_eval_labels()
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
        evaluations: list[Evaluation] = []
        meets = []
        assert proc.stdout is not None  # stdout=PIPE
        for line in proc.stdout:
            ev = parse_line(line, 0, time.monotonic() - t0)
            if ev is None or ev.key != "eval_request":
                continue
            proc.send_signal(signal.SIGSTOP)
            start = time.monotonic() - t0
            meets.append(_evaluate_on_host(entry, Path(out) / str(ev.metadata["checkpoint"]), images, labels))
            stop = time.monotonic() - t0
            proc.send_signal(signal.SIGCONT)
            evaluations.append(Evaluation(len(evaluations), None, start, stop, ""))
        proc.wait()
        return time_to_accuracy(Timeline(0.0, None, evaluations), meets).seconds


def container_run(entry_path: str, seed: int) -> tuple[float | None, float, float]:
    """(TTA, total reproduce wall time, training container wall time) for one run."""
    started = time.monotonic()
    (folder,) = reproduce(entry_path, ReproduceOptions(runs=1, seed=seed, infer=False))
    total = time.monotonic() - started
    training = json.loads((folder / "result.json").read_text())["training"]
    tta = training.get("tta_seconds") if training.get("reached") else None
    return tta, total, training["wall_seconds"]


def run(args) -> int:
    console = Console()
    entry = load_entry(args.entry)
    with console.status("warming the image cache (and staging the data if needed)"):
        with quietly():
            reproduce(args.entry, ReproduceOptions(runs=1, seed=0, infer=False))
    staged = data.staged(entry.task.id)

    with console.status(f"TTA: {args.runs} runs"):
        # Seeds 0.. (an auditor's choice), so the benchmark is the same run each time.
        with quietly():
            folders = reproduce(args.entry, ReproduceOptions(runs=args.runs, seed=0, infer=False))
    summary = summarize(folders)

    overheads, pairs = [], []
    for i in range(args.pairs):
        with console.status(f"host vs container: pair {i + 1}/{args.pairs}"):
            with quietly():
                c_tta, total, wall = container_run(args.entry, i)
            h_tta = host_tta(entry, staged, i, threads=os.cpu_count() or 1)
        overheads.append(total - wall)
        if c_tta and h_tta:
            pairs.append((h_tta, c_tta))

    table = Table(title=f"runner bench tta: {entry.name}")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("target")
    fmt = lambda v, spec=".2f": "--" if v is None else format(v, spec)  # noqa: E731
    table.add_row("TTA per run (s), seeds 0..",
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
