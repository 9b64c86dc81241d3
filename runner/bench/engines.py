"""``runner bench engines``: Docker, Podman and Charliecloud side by side, in one sitting.

Per engine (each chosen as ``RUNNER_ENGINE`` would choose it), one after the other:

- **cold build**: a copy of the entry under another name (its own tag; the entry's image is
  never removed) built by the runner's own ``build_entry(copy, engine, no_cache=True)``, the
  base image and the wheelhouse already there (an untimed build of the entry first fills
  them), so it times the build, not downloads; the copy's image is removed after. What
  ``no_cache`` asks of each engine differs: Docker and Podman ignore the layer cache but
  still write every layer; Charliecloud runs ``ch-image --rebuild build``, which runs every
  instruction again and still writes its build cache (git), as Docker writes layers;
- **reproduce**: ``runner reproduce ENTRY --seed 0 --smoke`` (with ``--full``, without
  ``--smoke``: the entry's real run, 200 CPU-seconds of training on this 2-core host, over
  the two minutes a figure of three engines times two runs can afford) started as
  a user starts it, with ``RUNNER_ENGINE`` set, the image present and the results in a
  throw-away folder, timed end to end: the sitting's first run (whatever per-image checks the
  runner had cached before) and a second, warm one;
- **freeze**: a container of the base image busy in a CPU loop, frozen N times: request to
  ``state() == "paused"`` (Docker and Podman: ``pause``; Charliecloud: the runner's cgroup
  freezer), and thawed: request to ``state() == "running"``; p50, p90 and max.

An engine this host lacks is a row saying why ("not available: ..."), never a crash; a
figure that failed says so in its row and the other figures still run.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table

from runner.bench.cli import runner_command
from runner.engine import ContainerSpec, Engine, EngineError, get_engine
from runner.engine.kinds import ENGINES, ENV_VAR
from runner.entry_build import build_entry
from runner.errors import UserError
from runner.images import ensure_base
from runner.manifest import load_entry

BUSY = ["python3", "-c", "while True: pass"]
BUSY_S = 0.05  # the loop runs this long between a thaw and the next freeze
STATE_TIMEOUT_S = 30.0
START_SETTLE_S = 1.0  # after `running`: the interpreter is past its start-up and in the loop
COPY_SUFFIX = "-bench-cold"
NO_CACHE = {"docker": "layer cache ignored, layers written", "podman": "layer cache ignored, layers written",
            "charliecloud": "ch-image --rebuild: every instruction run again, build cache written"}


@contextmanager
def chosen(name: str):
    """``RUNNER_ENGINE=name`` for this process while inside (what the runner's own code reads)."""
    before = os.environ.get(ENV_VAR)
    os.environ[ENV_VAR] = name
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(ENV_VAR, None)
        else:
            os.environ[ENV_VAR] = before


def engine_names(text: str) -> list[str]:
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in ENGINES]
    if unknown or not names:
        raise UserError(f"--engines names no engine the runner knows: {', '.join(unknown) or repr(text)}",
                        f"use a comma-separated list of: {', '.join(ENGINES)}")
    return list(dict.fromkeys(names))


def open_engine(name: str) -> tuple[Engine | None, str | None]:
    """(the engine, None), or (None, why it is not available here) in one line."""
    try:
        engine = get_engine()
    except UserError as exc:
        return None, exc.problem
    refusal = engine.refusal()
    if refusal:
        engine.close()
        return None, refusal
    return engine, None


# -- the figures -------------------------------------------------------------------------------
def spread(seconds: list[float]) -> dict:
    """n, p50, p90 (nearest rank) and max, in milliseconds."""
    ordered = sorted(seconds)
    p90 = ordered[max(0, math.ceil(0.9 * len(ordered)) - 1)]
    return {"n": len(ordered), "p50_ms": statistics.median(ordered) * 1000, "p90_ms": p90 * 1000,
            "max_ms": ordered[-1] * 1000}


def _until(container, status: str, started: float) -> float:
    """Seconds from ``started`` until the container's state reads ``status``."""
    while True:
        now = container.state().status
        elapsed = time.perf_counter() - started
        if now == status:
            return elapsed
        if elapsed > STATE_TIMEOUT_S:
            raise EngineError(f"the container was still {now}, not {status}, {STATE_TIMEOUT_S:.0f} s after the request")


def freeze_latency(engine: Engine, image: str, freezes: int) -> dict:
    """Freeze and thaw a container busy in a CPU loop ``freezes`` times: {"freeze": spread,
    "thaw": spread}, each from the request to the state the engine then reports, and
    "freeze_call": from the request until ``freeze`` returned."""
    spec = ContainerSpec(image=image, command=list(BUSY), mounts=[], workdir=None, label="bench",
                         timeout_s=STATE_TIMEOUT_S)
    container = engine.create(spec)
    try:
        container.start()
        _until(container, "running", time.perf_counter())
        time.sleep(START_SETTLE_S)
        froze, returned, thawed = [], [], []
        for _ in range(max(1, freezes)):
            started = time.perf_counter()
            container.freeze()
            returned.append(time.perf_counter() - started)
            froze.append(_until(container, "paused", started))
            started = time.perf_counter()
            container.thaw()
            thawed.append(_until(container, "running", started))
            time.sleep(BUSY_S)
        return {"freeze": spread(froze), "freeze_call": spread(returned), "thaw": spread(thawed)}
    finally:
        try:
            container.stop()
        except EngineError:
            pass
        try:
            container.remove()
        except EngineError:
            pass


def cold_build(engine: Engine, entry) -> dict:
    """Seconds of a no-cache build of a copy of the entry under another name (the same
    Dockerfile, lock and wheels; its own tag), then that image removed. The entry's own image
    is never removed: a run of it may be using it (a Charliecloud container's root is an
    overlay on the image's folder)."""
    with tempfile.TemporaryDirectory(prefix="runner-bench-cold-") as tmp:
        copy = Path(tmp) / f"{entry.name}{COPY_SUFFIX}"
        shutil.copytree(entry.path, copy, ignore=shutil.ignore_patterns("__pycache__"))
        manifest = copy / "entry.yaml"
        manifest.write_text(re.sub(r"(?m)^name:.*$", f"name: {copy.name}", manifest.read_text(), count=1))
        twin = load_entry(copy)
        started = time.monotonic()
        cold = build_entry(twin, engine, no_cache=True)
        seconds = time.monotonic() - started
    try:
        engine.remove_image(cold.tag)
    except EngineError:
        pass
    return {"seconds": seconds, "image_id": cold.image_id, "no_cache": NO_CACHE.get(engine.name, "")}


def timed_reproduce(name: str, entry_path: Path, results: Path, smoke: bool) -> dict:
    """{"seconds": ...} of ``runner reproduce`` on engine ``name``, started as a user starts it."""
    command = [*runner_command(), "reproduce", str(entry_path), "--seed", "0", *(["--smoke"] if smoke else [])]
    env = {**os.environ, ENV_VAR: name, "RUNNER_RESULTS": str(results)}
    started = time.monotonic()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.monotonic() - started
    if done.returncode not in (0, 1):  # 1: reproduced, but the claim was not met
        last = (done.stderr.strip().splitlines() or [""])[-1]
        raise UserError(f"runner reproduce exited {done.returncode}: {last[-300:]}",
                        f"run `RUNNER_ENGINE={name} runner reproduce {entry_path}` by hand")
    return {"seconds": seconds}


def measure(name: str, entry, args, status) -> dict:
    """Every figure of one engine; a figure that failed is {"error": why}."""
    row: dict = {"engine": name}
    with chosen(name):
        engine, why = open_engine(name)
        if engine is None:
            return {**row, "available": False, "why": why}
        row["available"] = True
        try:
            with status(f"{name}: the base image, the wheelhouse and the entry's image"):
                base = ensure_base(entry.base_image, engine)
                if not (args.skip_build and args.skip_reproduce):
                    build_entry(entry, engine)  # untimed: downloads done, the image there for reproduce
            if not args.skip_build:
                with status(f"{name}: cold build of {entry.name}"):
                    row["cold_build"] = _figure(cold_build, engine, entry)
            if not args.skip_reproduce:
                with tempfile.TemporaryDirectory(prefix="runner-bench-engines-") as results:
                    for run in ("first", "warm"):
                        with status(f"{name}: runner reproduce ({run})"):
                            row[f"reproduce_{run}"] = _figure(timed_reproduce, name, entry.path, Path(results),
                                                              not args.full)
            with status(f"{name}: {args.freezes} freezes"):
                row["freeze"] = _figure(freeze_latency, engine, base.tag, args.freezes)
        except (UserError, EngineError) as exc:
            row["error"] = str(exc)
        finally:
            engine.close()
    return row


def _figure(work, *arguments) -> dict:
    """``work(*arguments)``'s figure, or {"error": why} (the other figures still run)."""
    try:
        return work(*arguments)
    except (UserError, EngineError) as exc:
        return {"error": str(exc)}


# -- the report --------------------------------------------------------------------------------
def _seconds(figure: dict | None) -> str:
    if figure is None:
        return "skipped"
    return "failed" if "error" in figure else f"{figure['seconds']:.1f}"


def _ms(figure: dict | None, part: str) -> str:
    if figure is None:
        return "skipped"
    if "error" in figure:
        return "failed"
    s = figure[part]
    return f"{s['p50_ms']:.1f} / {s['p90_ms']:.1f} / {s['max_ms']:.1f}"


def render(rows: list[dict], entry_name: str, mode: str, freezes: int, console: Console) -> None:
    table = Table(title=f"runner bench engines: {entry_name} (reproduce: {mode}; {freezes} freezes)")
    for column in ("engine", "cold build s", "reproduce s (first)", "reproduce s (warm)",
                   "freeze ms p50/p90/max", "thaw ms p50/p90/max"):
        table.add_column(column, justify="left" if column == "engine" else "right", no_wrap=True)
    lines = []
    for row in rows:
        name = row["engine"]
        if not row["available"]:
            table.add_row(name, *["--"] * 5)
            lines.append(f"{name}: not available: {row['why']}")
            continue
        freeze = row.get("freeze")
        table.add_row(name, _seconds(row.get("cold_build")), _seconds(row.get("reproduce_first")),
                      _seconds(row.get("reproduce_warm")), _ms(freeze, "freeze"), _ms(freeze, "thaw"))
        if row.get("cold_build") and "error" not in row["cold_build"]:
            lines.append(f"{name}: cold build = {row['cold_build']['no_cache']}")
        for key in ("error", "cold_build", "reproduce_first", "reproduce_warm", "freeze"):
            value = row.get(key)
            error = value if key == "error" else (value or {}).get("error")
            if error:
                lines.append(f"{name}: {key.replace('_', ' ')} failed: {error}")
    console.print(table)
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)


def run(args) -> int:
    names = engine_names(args.engines)
    entry = load_entry(args.entry)
    mode = "skipped" if args.skip_reproduce else "the full run, --seed 0" if args.full else "--smoke --seed 0"
    console = Console(stderr=args.json)  # with --json, stdout holds the JSON alone
    load = os.getloadavg()  # timings need an idle host: what it was doing when we started
    rows = [measure(name, entry, args, console.status) for name in names]
    if args.json:
        print(json.dumps({"entry": entry.name, "reproduce": mode, "freezes": args.freezes, "python": sys.executable,
                          "cpus": os.cpu_count(), "load_average_at_start": load,
                          "engines": rows}, indent=1))
    else:
        render(rows, entry.name, mode, args.freezes, console)
        console.print(f"load average at the start: {load[0]:.2f} (1 min) on {os.cpu_count()} CPUs", highlight=False)
    return 0
