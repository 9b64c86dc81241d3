"""The inference phase: the entry's image runs the toolkit's harness on the trained model,
the host stamps each backend's timed pass and scores its predictions."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runner import paths
from runner.energy import EnergyMeter, per_10k, window_energy
from runner.engine.containers import ContainerSpec, Mount, prepare_writable, run_container
from runner.engine.interface import Engine
from runner.events import Event, parse_line, write_events
from runner.inference import loadgen
from runner.inference.measure import evaluate_backend
from runner.inference.preflight import GPU_BACKENDS
from runner.plan import SeedRun
from runner.report import Phase, reporter
from runner.results.inference import BackendRun

if TYPE_CHECKING:
    from runner.data.store import EvalLabels

HARNESS_MOUNT = "/opt/runner/harness"
INFER_TIMEOUT_S = 4 * 3600



def harness_command(entry, backends: list[str], threads: int, *, with_loadgen: bool | str = False) -> list[str]:
    """``with_loadgen``: False (no LoadGen), True (the ``dawnbench`` settings: a few seconds
    beside the per-item pass) or a settings profile's name (``mlperf``: MLPerf's minimums)."""
    spec = entry.inference
    command = [
        "python3", "-m", "harness",
        "--entry-dir", "/entry",
        "--builder", spec.builder,
        "--weights", f"/output/{entry.final_weights}",
        "--framework", entry.framework["name"],
        "--eval-dir", "/data/eval",
        "--out", "/inference",
        "--backends", *backends,
        "--warmup", str(spec.warmup),
        "--threads", str(threads),
        "--opset", str(spec.opset),
        "--topk", str(entry.task.topk),
    ]
    if entry.task.inputs != "images":
        command += ["--kind", entry.task.inputs]
    if spec.fp16:
        command.append("--fp16")
    if with_loadgen:
        command.append("--loadgen")
        command += ["--loadgen-settings", loadgen.settings_profile(with_loadgen)]
    return command


@dataclass
class Windows:
    """Host-stamped infer_start/infer_stop per backend (and loadgen_start/loadgen_stop per
    backend and scenario), and the harness' error lines."""

    events: list[Event] = field(default_factory=list)
    start: dict[str, float] = field(default_factory=dict)
    stop: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    loadgen_start: dict[tuple[str, str], float] = field(default_factory=dict)
    loadgen_stop: dict[tuple[str, str], float] = field(default_factory=dict)

    @classmethod
    def from_events(cls, events: list[Event]) -> "Windows":
        """The windows of an inference phase already recorded (``inference/events.jsonl``)."""
        windows = cls()
        for ev in events:
            windows.add(ev)
        return windows

    def on_line(self, line: str, t: float) -> None:
        if line.startswith("harness: error:"):
            self.errors.append(line.removeprefix("harness: error:").strip())
        ev = parse_line(line, len(self.events), t)
        if ev is not None:
            self.add(ev)

    def add(self, ev: Event) -> None:
        self.events.append(ev)
        backend = ev.metadata.get("backend")
        if ev.key == "infer_start" and isinstance(backend, str):
            self.start[backend] = ev.t
        elif ev.key == "infer_stop" and isinstance(backend, str):
            self.stop[backend] = ev.t
        elif ev.key in ("loadgen_start", "loadgen_stop") and isinstance(backend, str):
            scenario = str(ev.metadata.get("scenario"))
            stamps = self.loadgen_start if ev.key == "loadgen_start" else self.loadgen_stop
            stamps[(backend, scenario)] = ev.t

    def window(self, backend: str) -> float | None:
        if backend in self.start and backend in self.stop and self.stop[backend] >= self.start[backend]:
            return self.stop[backend] - self.start[backend]
        return None

    def loadgen_windows(self, backend: str) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for scenario in loadgen.SCENARIOS:
            start = self.loadgen_start.get((backend, scenario))
            stop = self.loadgen_stop.get((backend, scenario))
            out[scenario] = stop - start if start is not None and stop is not None and stop >= start else None
        return out


@dataclass(frozen=True)
class TrainedModel:
    """What the inference phase takes beyond the plan: the folder training left the final
    model in (the run's ``output/``, mounted read-only; a re-inference reads the result's while
    its plan's folder takes the new files), and the host's side of the evaluation set, which no
    container sees: its labels, and whether it is the task's whole set (staging checked its
    size; a smoke run's synthetic stand-in is smaller, and the predictions must match the
    labels' count instead)."""

    output_dir: Path
    labels: EvalLabels
    whole_set: bool = True


_ITEMS = re.compile(r"^harness progress: (\S+) (\d+)/(\d+) items$")


@dataclass
class InferenceProgress:
    """The phase's progress from the host-stamped events: backend k of n and its items.
    The harness prints no line per item (it would cost the timed pass): a tenth of the pass at a
    time, between two items. Only the plan's own backend names are shown: the harness runs beside the entry's code,
    whose output could imitate an event line."""

    windows: Windows
    backends: tuple[str, ...]
    phase: Phase

    def on_line(self, line: str, t: float) -> None:
        if m := _ITEMS.match(line.strip()):  # how far the timed pass is (a tenth at a time)
            name, done, total = m[1], int(m[2]), int(m[3])
            if name in self.backends:
                k = self.backends.index(name) + 1
                self.phase.update(f"backend {k} of {len(self.backends)} ({name}), {done:,} of {total:,} items timed")
            return
        seen = len(self.windows.events)
        self.windows.on_line(line, t)  # stamped with ``t``: what follows is outside the window
        for ev in self.windows.events[seen:]:
            backend, count = ev.metadata.get("backend"), ev.metadata.get("count")
            if backend not in self.backends or ev.key not in ("infer_start", "infer_stop"):
                continue
            items = f"{count:,} items" if isinstance(count, int) and not isinstance(count, bool) else "items"
            k = self.backends.index(backend) + 1
            doing = "timing" if ev.key == "infer_start" else "timed"
            self.phase.update(f"backend {k} of {len(self.backends)} ({backend}), {doing} {items}", step=True)


def inference_spec(plan: SeedRun, model: TrainedModel) -> ContainerSpec:
    """The inference container: the harness on the trained model (read-only at /output), the
    evaluation data, LoadGen's site folder when the plan asks for LoadGen, a writable
    /inference in the plan's folder; the plan's CPU and memory limits, one GPU when a backend
    needs it."""
    entry, threads, with_loadgen = plan.entry, plan.entry.inference.threads, plan.options.loadgen
    inference_dir = plan.result_dir / "inference"
    prepare_writable(inference_dir)
    mounts = [
        Mount(model.output_dir, "/output"),
        Mount(plan.data.eval_dir, "/data/eval"),
        Mount(paths.harness_dir(), HARNESS_MOUNT),
        Mount(inference_dir, "/inference", read_only=False),
    ]
    python_path = "/opt/runner"
    if with_loadgen:
        mounts.append(Mount(loadgen.site_dir(), loadgen.SITE_MOUNT))
        python_path += ":" + loadgen.SITE_MOUNT
    return ContainerSpec(
        image=plan.image,
        command=harness_command(entry, list(plan.backends), threads, with_loadgen=with_loadgen),
        mounts=mounts,
        env={
            "PYTHONPATH": python_path,
            "PYTHONDONTWRITEBYTECODE": "1",  # the harness mount is read-only
            "RUNNER_TASK": entry.task.id,
            "RUNNER_THREADS": str(threads),
            "OMP_NUM_THREADS": str(threads),
            "HOME": "/tmp",
        },
        workdir="/entry",
        cpus=plan.limits.cpus,
        memory=plan.limits.memory,
        gpus=1 if any(b in GPU_BACKENDS for b in plan.backends) else 0,
        timeout_s=INFER_TIMEOUT_S,
        label="infer",
    )


def run_inference(engine: Engine, plan: SeedRun, model: TrainedModel) -> dict[str, BackendRun]:
    """Run the harness in the plan's image on each of its backends and return
    ``result.json``'s ``inference`` section, a typed record per backend.

    Writes ``inference/`` and ``logs/infer.log`` in the plan's folder (``plan.result_dir``:
    a re-inference's work folder, whose files it swaps in only on success). Every backend
    gets a record; one that failed says why in ``gate_reason`` (and ``error`` when the
    harness or container failed rather than the gate). The backends were checked against
    the host before (``check_backends_available``).
    """
    spec = inference_spec(plan, model)
    inference_dir = plan.result_dir / "inference"
    windows = Windows()
    meter = EnergyMeter(list(range(spec.gpus))).start()
    origin: list[float] = []
    try:
        with reporter().phase("infer", f"starting the harness for {len(plan.backends)} backends") as phase:
            progress = InferenceProgress(windows, tuple(plan.backends), phase)
            outcome = run_container(engine, spec, progress.on_line, plan.log("infer.log"),
                                    on_started=lambda container, clock: origin.append(time.monotonic() - clock()))
    finally:
        series = meter.stop()
    write_events(inference_dir / "events.jsonl", windows.events)
    if outcome.interrupted:
        raise KeyboardInterrupt

    labels = model.labels
    # A conforming set has exactly the task's size (staging checks it); a smoke run's
    # synthetic stand-in is smaller, and its predictions must match it instead.
    expected = None if model.whole_set else len(labels)
    usd_per_hour = plan.profile.price.usd_per_hour
    results: dict[str, BackendRun] = {}
    for backend in plan.backends:
        record = BackendRun.from_dict(backend, evaluate_backend(
            backend, inference_dir / backend, plan.entry.task, labels, windows.window(backend), usd_per_hour,
            expected_count=expected, loadgen_windows=windows.loadgen_windows(backend),
        ))
        if record.error == "no info.json" and not outcome.ok:
            # The harness stopped before this backend: say what stopped it.
            why = "; ".join(windows.errors) or outcome.reason() or "unknown"
            record.gate_reason = f"inference phase failed before {backend} ran: {why}"
            record.error = why
        record.energy = pass_energy(series, windows, backend, origin[0] if origin else None, record.count)
        results[backend] = record
    return results


def pass_energy(series, windows: Windows, backend: str, origin: float | None, count: int | None) -> dict:
    """The timed pass's energy (host-stamped infer_start..infer_stop) and joules per 10,000 items."""
    start, stop = windows.start.get(backend), windows.stop.get(backend)
    if start is not None and stop is not None and origin is not None and stop >= start:
        record = window_energy(series, [(start + origin, stop + origin)], None)
    else:
        record = window_energy(series, None, "the backend has no timed pass")
    record["joules_per_10k_items"] = per_10k(record["joules"], count)
    return record
