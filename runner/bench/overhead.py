"""The runner's cost against what a user would do instead: the same training in the same
image under a plain ``docker run``.

Each pair runs, back to back on this host, with the same seed:

- ``runner reproduce ENTRY --seed N --no-infer``, timed end to end in this process (the
  host checks, the image and data checks, the fingerprint, the locked-down training
  container, every frozen evaluation, scoring and signing);
- the ``docker run`` this benchmark prints: the same image, the same mounts (training data
  read-only, a writable /output), the same cores, memory limit, read-only root, tmpfs,
  user, dropped capabilities and no network, running the entry's train command. Nobody
  answers its evaluation requests; it trains the same epochs.

The pairs are interleaved: the runner goes first in even pairs, the plain run in odd ones,
so a host that gets busier or quieter during the benchmark weighs on both sides alike.
The ratio (runner / plain) per pair, and its min / median / max, is the figure. Where the
difference goes is named phase by phase (``difference_rows``): each of the runner's phases
from its result's ``timings`` section, the training phase split into what is not the
entry's own run (the evaluator's and the container's start, the frozen evaluation windows,
the evaluations after the container exited) and the container's run against the plain
one, and the finishing that comes after result.json is final (the cross-seed checks,
writing and signing), from this benchmark's own stopwatch. The rows add up to the
difference; each is the median over the pairs.
Target: median ratio at most 1.05.
"""

from __future__ import annotations

import json
import os
import shlex
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from runner import data
from runner.entry_build import build_entry
from runner.engine import get_engine
from runner.errors import UserError
from runner.manifest import load_entry
from runner.options import ReproduceOptions
from runner.engine.containers import CONTAINER_USER, PIDS_LIMIT, SHM_SIZE, TMPFS, cpu_limits
from runner.engine.kinds import current
from runner.initial_weights import INIT_DIR
from runner.run.init_weights import INIT_MOUNT
from runner.plan import RunData, make_plan
from runner.report import quietly
from runner.reproduce import reproduce
from runner.timings import render_timings

RATIO_TARGET = 1.05
FINISHING_ROW = "finishing: cross-seed checks, result.json, signing"
CONTAINER_ROW = "training: the container's run, less the plain run"


def plain_command(entry, image_id: str, train_dir: Path, output_dir: Path, seed: int,
                  init_dir: Path | None = None) -> list[str]:
    """The ``docker run`` a user would write: the runner's lock-down, without the runner.
    ``init_dir``: a runner run's drawn initial weights (its ``init/``), which an entry that
    loads them (``runner_init``) cannot train without."""
    # The runner's own plan for this seed: the same limits and environment, from one place.
    # (It mounts the training data only: the evaluation data are the runner's, never the entry's.)
    plan = make_plan(entry.path, ReproduceOptions(runs=1, seed=seed)).resolved(
        gpus=0, backends=(), image=image_id, data=RunData(train_dir, train_dir, "")
    ).for_run(seed, output_dir.parent, output_dir.parent)
    limits = plan.limits
    engine = current()
    command = [engine.name, "run", *engine.cli_options(), "--rm", "--network", "none", "--user", CONTAINER_USER,
               "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--read-only",
               *[arg for path, options in TMPFS.items() for arg in ("--tmpfs", f"{path}:{options}")],
               "--shm-size", SHM_SIZE, "--pids-limit", str(PIDS_LIMIT), "--workdir", "/entry",
               "-v", f"{train_dir}:/data/train:ro", "-v", f"{output_dir}:/output:rw"]
    cpu = cpu_limits(limits.cpus)
    if "cpuset_cpus" in cpu:
        command += ["--cpuset-cpus", cpu["cpuset_cpus"]]
    elif "nano_cpus" in cpu:
        command += ["--cpus", str(cpu["nano_cpus"] / 1e9)]
    if limits.memory:
        command += ["--memory", str(limits.memory), "--memory-swap", str(limits.memory)]
    if init_dir is not None and init_dir.is_dir():
        command += ["-v", f"{init_dir}:{INIT_MOUNT}:ro", "-e", f"RUNNER_INIT={INIT_MOUNT}"]
    for key, value in plan.train_env().items():
        command += ["-e", f"{key}={value}"]
    return [*command, image_id, *entry.train.command]


def _plain_run(command: list[str]) -> float:
    started = time.monotonic()
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise UserError(f"the plain {current().name} run failed (exit {done.returncode}): "
                        f"{done.stderr.strip().splitlines()[-1:] or ''}",
                        "run the printed command by hand to see why")
    return seconds


def difference_rows(timings: dict, runner_s: float, plain_s: float) -> dict[str, float]:
    """Where one pair's difference (``runner_s - plain_s``) went, by name, in the order it
    ran: the runner's phases (``timings``: its result's section), the training phase split
    into its parts, and the finishing after result.json was final. The rows add up to the
    difference."""
    rows: dict[str, float] = {}
    for phase in timings.get("phases") or []:
        seconds = float(phase["seconds"])
        if phase["name"] != "training":
            rows[phase["name"]] = rows.get(phase["name"], 0.0) + seconds
            continue
        parts = phase.get("parts") or {}
        split = {"training: before the container started (evaluator, create)": parts.get("before_start_seconds"),
                 "training: frozen evaluation windows": parts.get("frozen_seconds"),
                 "training: after exit (evaluations, final model, sensitivity)": parts.get("after_exit_seconds")}
        for name, value in split.items():
            value = float(value or 0.0)
            rows[name] = value
            seconds -= value
        rows[CONTAINER_ROW] = seconds - plain_s
    rows[FINISHING_ROW] = runner_s - float(timings.get("total_seconds") or 0.0)
    return rows


def evaluation_seconds(timings: dict) -> float:
    """The checkpoints' evaluations of one run, as the host timed them (each one's builder and
    predictions, in the training phase's parts): work a plain run does not do, since nobody
    answers its requests, and that a user who wants its accuracy must do all the same."""
    for phase in timings.get("phases") or []:
        if phase["name"] == "training":
            return sum(float(e.get("builder_seconds") or 0.0) + float(e.get("predict_seconds") or 0.0)
                       for e in (phase.get("parts") or {}).get("evaluations") or [])
    return 0.0


def _difference_table(pairs: list[dict[str, float]], plain_median: float) -> Table:
    """The median of each row over the pairs, and its share of the plain run."""
    names = list(dict.fromkeys(name for rows in pairs for name in rows))
    table = Table(title="where the difference goes (median over the pairs)", title_justify="left")
    table.add_column("phase")
    for column in ("seconds", "% of plain"):
        table.add_column(column, justify="right", no_wrap=True)
    for name in names:
        seconds = statistics.median(rows.get(name, 0.0) for rows in pairs)
        table.add_row(name, f"{seconds:.2f}", f"{100 * seconds / plain_median:.1f}")
    total = statistics.median(sum(rows.values()) for rows in pairs)
    table.add_row("[bold]difference[/]", f"{total:.2f}", f"{100 * total / plain_median:.1f}")
    return table


def _runner_side(console: Console, label: str, entry: str, seed: int) -> tuple[float, Path]:
    """One ``runner reproduce --no-infer``: its seconds end to end and its run folder."""
    with console.status(f"{label}: runner"):
        started = time.monotonic()
        with quietly():
            (folder,) = reproduce(entry, ReproduceOptions(runs=1, seed=seed, infer=False))
        return time.monotonic() - started, folder


def _plain_side(console: Console, label: str, command: list[str]) -> float:
    with console.status(f"{label}: plain {current().name} run"):
        return _plain_run(command)


def run(args) -> int:
    console = Console()
    entry = load_entry(args.entry)
    with console.status("warming the image cache (and staging the data if needed)"):
        with quietly():
            (warm,) = reproduce(args.entry, ReproduceOptions(runs=1, seed=args.seed, infer=False))
    built = build_entry(entry, get_engine())
    staged = data.staged(entry.task.id)
    pairs: list[tuple[int, float, float, float | None]] = []
    differences: list[dict[str, float]] = []
    evaluated: list[float] = []  # each pair's runner run: its evaluations' seconds
    last: Path | None = None
    with tempfile.TemporaryDirectory(prefix="runner-bench-plain-") as tmp:
        for i in range(args.pairs):
            seed = args.seed + i
            output = Path(tmp) / f"output-{i}"
            output.mkdir()
            os.chmod(output, 0o777)
            command = plain_command(entry, built.image_id, staged.train_dir, output, seed, warm / INIT_DIR)
            if i == 0:
                console.print("plain run: " + shlex.join(command))
            label = f"pair {i + 1}/{args.pairs}"
            if i % 2 == 0:  # interleaved: the runner first, then the plain run first
                runner_s, last = _runner_side(console, label, args.entry, seed)
                plain_s = _plain_side(console, label, command)
            else:
                plain_s = _plain_side(console, label, command)
                runner_s, last = _runner_side(console, label, args.entry, seed)
            result = json.loads((last / "result.json").read_text())
            tta = (result.get("training") or {}).get("tta_seconds")
            pairs.append((seed, runner_s, plain_s, tta))
            differences.append(difference_rows(result.get("timings") or {}, runner_s, plain_s))
            evaluated.append(evaluation_seconds(result.get("timings") or {}))

    ratios = [r / p for _, r, p, _ in pairs]
    table = Table(title=f"runner bench overhead: {entry.name} (runner reproduce --no-infer vs plain {current().name} run)")
    for column in ("seed", "first", "runner (s)", "plain (s)", "ratio", "runner TTA (s)"):
        table.add_column(column, justify="right", no_wrap=True)
    for i, ((seed, r, p, tta), ratio) in enumerate(zip(pairs, ratios)):
        table.add_row(str(seed), "runner" if i % 2 == 0 else "plain", f"{r:.2f}", f"{p:.2f}", f"{ratio:.3f}",
                      "--" if tta is None else f"{tta:.2f}")
    console.print(table)
    console.print(_difference_table(differences, statistics.median(p for _, _, p, _ in pairs)))
    median = statistics.median(ratios)
    verdict = "[green]meets[/]" if median <= RATIO_TARGET else "[red]misses[/]"
    console.print(f"ratio min {min(ratios):.3f}  median {median:.3f}  max {max(ratios):.3f}  "
                  f"({verdict} the target of {RATIO_TARGET}); load average {_loadavg()}")
    # Beside the figure, not instead of it: the part of the difference that is the evaluations.
    apart = [(r - e) / p for (_, r, p, _), e in zip(pairs, evaluated)]
    console.print(f"of which the checkpoints' evaluations (builders and predictions, after the entry exited): "
                  f"median {statistics.median(evaluated):.2f} s; the ratio less them: median "
                  f"{statistics.median(apart):.3f} (min {min(apart):.3f}, max {max(apart):.3f})", highlight=False)
    if last is not None:
        timings = json.loads((last / "result.json").read_text()).get("timings")
        if timings:
            console.print(render_timings(timings, title=f"where the last runner run's time went ({last.name})"))
    return 0


def _loadavg() -> str:
    """The host's load (1, 5, 15 minutes): the figures are only as quiet as the host was."""
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"
