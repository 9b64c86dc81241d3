"""The runner's evaluator: a second locked-down container, from the entry's image, that
computes predictions for the checkpoints the entry asks to have evaluated.

It gets the evaluation inputs and the runner's perturbed probe inputs, the runner's
copies of the checkpoints (read-only), and a folder for its predictions; no labels, no
training data, no network, no view of the training container. A training run starts it
just before the entry (``prestart``): its start-up (the container, the interpreter, the
framework's imports, the harness's warm-up; no code of the entry's own) runs beside the
entry's start-up at the lowest CPU weight, so it takes only cycles the entry leaves idle,
and it is frozen (the same cgroup freezer as the training container) the moment it is
ready, or after ``READY_GRACE_S``, so the first evaluation pays none of it. Requests come
only once the training container has exited (``training.py``): the evaluator runs the
entry's builder, and nothing of the entry may run on the clock outside its training
container, nor take its cores. From then on it stays awake between requests, at the
engine's default weight (``stay_awake``). Callers that start it themselves (the replay)
get it frozen between requests. Nothing flows from it to the training container: its only
writable folder is read by the host alone.

That folder is an outbox, not the result: the builder is the entry's code and may leave a
thread behind, which could rewrite an earlier answer with a later, better one (the final
model's predictions over the first checkpoint's: an earlier crossing). So each answer is
copied into the result (``evaluations/<n>/``, which no container mounts) the moment the
evaluator says it is done, before the next request is written, and everything after reads
those copies (``seal_answer``).

The evaluator runs the entry's builder, whose time is excluded from the clock: the host
bounds it. From the moment a request is written, the evaluator must report the model
built and the checkpoint loaded within the manifest's ``inference.builder_seconds`` (the
run contract's default, capped); past it the evaluator is stopped, the evaluation fails
with that reason, and the next request starts a new one.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from runner import paths
from runner.run.cpu_usage import ContainerCpu
from runner.run.gpu_freeze import run_gpu_indices
from runner.engine.containers import ContainerOutcome, ContainerSpec, Mount, prepare_writable, run_container
from runner.engine.interface import Container, Engine, EngineError
from runner.events import parse_line
from runner.frameworks import get_framework
from runner.plan import SeedRun
from runner.entry_outputs import UnsafeEntryFile, copy_limited, open_regular
from runner.errors import RunnerError

HARNESS_MOUNT = "/opt/runner/harness"
READY_TIMEOUT_S = 300.0
EVALUATION_TIMEOUT_S = 1800.0
# A prestarted evaluator not ready by then is frozen anyway; the first request resumes it.
READY_GRACE_S = 60.0
LOWEST_CPU_WEIGHT = 2  # the engine's minimum cpu shares
DEFAULT_CPU_WEIGHT = 1024
# The largest file of one answer the runner copies out of the outbox (predictions, the
# provenance record): far above any task's (ImageNet's top-5 predictions are 2 MB).
MAX_ANSWER_FILE_BYTES = 256 * 2**20
# glibc's allocator, for a process that allocates and frees the same large activation
# buffers batch after batch: keep freed memory in the heap (no trim) and serve blocks up to
# 32 MiB (glibc's largest mmap threshold) from it. By default, the heap's top is given
# back to the kernel and faulted in again on the next batch: the default entry's 10,000
# items took 0.33-0.40 s to predict, 0.17-0.22 s with these (in its image, 2 Zen 5 cores;
# the same predictions). Larger blocks are still mapped and unmapped one by one.
MALLOC_ENV = {"MALLOC_TRIM_THRESHOLD_": str(2**30), "MALLOC_MMAP_THRESHOLD_": str(32 * 2**20)}


def evaluator_device_args(framework: str, gpus: int) -> list[str]:
    """A run with GPUs evaluates on them: a loader that moves its model (the framework's
    ``gpu_device``: PyTorch's, to CUDA) is told to (and fails the evaluation, saying so, when
    the container sees no GPU). Other frameworks place their models themselves."""
    device = get_framework(framework).gpu_device
    return ["--device", device] if gpus and device else []


class EvaluatorError(RunnerError):
    """The evaluator could not give predictions for a request; the message says why."""

    default_fix = "read the evaluator's log in the result folder, correct the entry's model builder, and run again"


@dataclass
class Answer:
    """What one evaluation gave: predictions per input set, the provenance record, and the
    builder's time as the host measured it (request written -> model built)."""

    files: dict[str, str]  # set name -> path relative to the evaluations folder
    builder_seconds: float | None = None
    provenance: str | None = None  # relative to the evaluations folder
    notes: dict = field(default_factory=dict)
    predict_seconds: float | None = None  # model built -> answer, host clock (bounded after inference)
    # ... and the CPU time the evaluator's container used meanwhile (its cgroup): the
    # forward passes' cost in CPU-seconds, whatever the threads (evidence of training, 4f)
    predict_cpu_seconds: float | None = None
    weights: dict | None = None  # the checkpoint's tensors, when asked (runner.score.weights_dump)


EXTRA_MOUNT = "/data/extra"  # a study's second test sets, each at <mount>/<name>/images.npy


def _mounts(plan: SeedRun, extra_inputs: dict[str, Path]) -> tuple[list[Mount], list[str]]:
    """The evaluator's mounts, and its input sets (``name=folder`` in the container)."""
    mounts = [
        Mount(paths.harness_dir(), HARNESS_MOUNT),
        Mount(plan.data.eval_dir, "/data/eval"),
        Mount(plan.checkpoints_dir, "/checkpoints"),
        Mount(plan.requests_dir, "/requests"),
        Mount(plan.evaluator_outbox, "/evaluations", read_only=False),
    ]
    input_sets = ["clean=/data/eval"]
    if plan.probe_dir is not None:
        mounts.append(Mount(plan.probe_dir, "/data/probe"))
        input_sets.append("probe=/data/probe")
    for name, folder in sorted(extra_inputs.items()):
        mounts.append(Mount(folder, f"{EXTRA_MOUNT}/{name}"))
        input_sets.append(f"{name}={EXTRA_MOUNT}/{name}")
    return mounts, input_sets


def evaluator_spec(plan: SeedRun, extra_inputs: dict[str, Path] | None = None) -> ContainerSpec:
    """The evaluator's container: the entry's image running the harness's ``evaluate`` on the
    run's limits and GPUs, at the lowest CPU weight."""
    limits = plan.limits
    framework = plan.entry.framework["name"]
    mounts, input_sets = _mounts(plan, extra_inputs or {})
    return ContainerSpec(
        image=plan.image,
        command=[
            "python3", "-m", "harness", "evaluate", "--entry-dir", "/entry",
            "--builder", plan.entry.inference.builder, "--framework", framework, "--requests", "/requests",
            "--out", "/evaluations", "--inputs", *input_sets, "--kind", plan.entry.task.inputs,
            "--topk", str(plan.entry.task.topk), "--threads", str(limits.threads),
            *evaluator_device_args(framework, limits.gpus),
        ],
        mounts=mounts,
        env={
            "PYTHONPATH": "/opt/runner",
            "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": str(limits.threads),
            "HOME": "/tmp",
            **MALLOC_ENV,
        },
        cpus=limits.cpus,
        memory=limits.memory,
        # The run's GPUs, by the ids the training container has (``--gpus N``: 0..N-1).
        gpu_ids=[str(g) for g in run_gpu_indices(limits.gpus)] or None,
        timeout_s=limits.evaluator_timeout_s,
        label="evaluator",
        cpu_shares=LOWEST_CPU_WEIGHT,
    )


class _Progress:
    """What the evaluator has said so far (its output's events and errors), stamped on the
    host's clock as each line arrives, under the one condition every waiting thread shares."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.ready = False
        self.ready_at: float | None = None  # host monotonic time it first said it was ready
        self.errors: list[str] = []
        self.answers: dict[int, str | None] = {}  # index -> None (done) or the failure
        self.built: dict[int, tuple[float, dict]] = {}  # index -> (host monotonic time, its event)
        self.done_at: dict[int, float] = {}  # index -> host monotonic time of its answer
        self.cpu: ContainerCpu | None = None  # the evaluator container's CPU counter
        self._cpu_at: dict[tuple[int, str], float | None] = {}  # (index, "built" | "done") -> CPU seconds

    def restart(self) -> None:
        """A new container: not ready, no errors yet (the answers of earlier ones stay)."""
        self.ready, self.errors = False, []

    def see(self, line: str, t: float) -> None:
        """``run_container``'s ``on_line``."""
        if line.startswith("harness: error:"):
            self.errors.append(line.removeprefix("harness: error:").strip())
        ev = parse_line(line, 0, t)
        if ev is None:
            return
        with self.changed:
            index = ev.metadata.get("index")
            if ev.key == "evaluator_ready":
                self.ready = True
                if self.ready_at is None:  # the first start's (a restart after a failure keeps it)
                    self.ready_at = time.monotonic()
            elif ev.key == "model_built" and isinstance(index, int) and index not in self.built:
                self.built[index] = (time.monotonic(), dict(ev.metadata))
                self._cpu_at[(index, "built")] = self._cpu_seconds()
            elif ev.key in ("evaluation_done", "evaluation_failed") and isinstance(index, int):
                self.done_at.setdefault(index, time.monotonic())
                self._cpu_at.setdefault((index, "done"), self._cpu_seconds())
                failure = ev.metadata.get("message") if ev.key == "evaluation_failed" else None
                self.answers[index] = str(failure or "failed") if ev.key == "evaluation_failed" else None
            self.changed.notify_all()

    def wait_until(self, done: Callable[[], bool], timeout: float) -> bool:
        """Wait until ``done()`` (checked at each line the evaluator says); False: timed out."""
        with self.changed:
            return self.changed.wait_for(done, timeout=timeout)

    def wait_built(self, index: int, timeout: float,
                   running: Callable[[], bool]) -> tuple[tuple[float, dict] | None, bool]:
        """Request ``index``'s ``model_built`` (None: not said), and whether it is late: no word
        of the request within ``timeout`` while the evaluator still runs."""
        with self.changed:
            self.changed.wait_for(lambda: index in self.built or index in self.answers or not running(),
                                  timeout=timeout)
            built = self.built.get(index)
            return built, built is None and index not in self.answers and running()

    def wait_answer(self, index: int, timeout: float, running: Callable[[], bool]) -> tuple[bool, str | None]:
        """Whether request ``index`` was answered within ``timeout`` (while the evaluator runs),
        and its failure (None: done)."""
        with self.changed:
            self.changed.wait_for(lambda: index in self.answers or not running(), timeout=timeout)
            return index in self.answers, self.answers.get(index)

    def _cpu_seconds(self) -> float | None:
        return self.cpu.seconds() if self.cpu else None

    def answer(self, index: int, asked: float, files: dict[str, str], provenance: str | None) -> Answer:
        """Request ``index``'s answer, written at ``asked``, with the times it said."""
        built = self.built.get(index)
        seconds = round(built[0] - asked, 6) if built is not None else None
        predict = round(self.done_at[index] - built[0], 6) if built is not None and index in self.done_at else None
        notes = {k: v for k, v in (built[1] if built else {}).items() if k == "shuffled_tensors" and isinstance(v, int)}
        return Answer(files, seconds, provenance, notes, predict, self._predict_cpu(index))

    def _predict_cpu(self, index: int) -> float | None:
        """The evaluator's CPU seconds from ``model_built`` to its answer (None: not measured)."""
        built, done = self._cpu_at.get((index, "built")), self._cpu_at.get((index, "done"))
        return round(done - built, 6) if built is not None and done is not None and done >= built else None


class _Freezer:
    """Freezes the evaluator's container between requests (it holds the entry's code) and
    thaws it for one, under one lock: never while a request is in flight, once it is being
    closed (a paused container cannot be killed), or once it stays awake."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.container: Container | None = None
        self.paused = False
        self.asking = False
        self.closing = False
        self.awake = False  # the entry has exited: no freeze between requests

    def pause(self, running: bool) -> None:
        with self.lock:
            if self.container is None or self.paused or self.asking or self.closing or self.awake or not running:
                return
            try:
                self.container.freeze()
                self.paused = True
            except EngineError:
                pass  # exited or being removed: nothing left to run

    def resume(self) -> None:
        with self.lock:
            if not self.paused:
                return
            self.paused = False
            try:
                if self.container is not None:  # always, once paused
                    self.container.thaw()
            except EngineError:
                pass

    def flag(self, *, asking: bool | None = None, closing: bool | None = None, awake: bool | None = None) -> None:
        """Set those given, against a pause under way."""
        with self.lock:
            self.asking = self.asking if asking is None else asking
            self.closing = self.closing if closing is None else closing
            self.awake = self.awake if awake is None else awake


def _request_body(checkpoint_name: str, shuffle_seed: int | None, items: int | None,
                  probe_items: tuple[int, int] | None, weights: bool) -> dict:
    """One request's file, in the harness's words (``evaluate``'s request folder)."""
    body: dict = {"checkpoint": f"/checkpoints/{checkpoint_name}"}
    if shuffle_seed is not None:
        body["shuffle_seed"] = int(shuffle_seed)
        if items:
            body["items"] = int(items)
    if weights:  # the checkpoint's tensors too (runner.score.weights_dump)
        body["weights"] = True
    if probe_items is not None:
        body["probe_items"], body["probe_seed"] = int(probe_items[0]), int(probe_items[1])
    return body


def _answer_files(plan: SeedRun, extra_inputs: dict[str, Path], index: int,
                  shuffle_seed: int | None) -> tuple[dict[str, str], str | None]:
    """Request ``index``'s files, relative to the evaluations folder: its predictions per input
    set (a sensitivity check's, of the clean set only), and its provenance record (none for
    a sensitivity check)."""
    names = ["clean"] + (["probe"] if plan.probe_dir is not None and shuffle_seed is None else [])
    names += sorted(extra_inputs) if shuffle_seed is None else []
    suffix = "json" if plan.entry.task.inputs == "questions" else "npy"
    provenance = None if shuffle_seed is not None else f"{index}/provenance.json"
    return {name: f"{index}/{name}.{suffix}" for name in names}, provenance


def _write_request(requests_dir: Path, index: int, body: dict) -> float:
    """Write request ``index`` whole; the host's monotonic time it appeared."""
    request = requests_dir / f"{index}.json"
    tmp = request.with_suffix(".tmp")
    tmp.write_text(json.dumps(body))
    asked = time.monotonic()
    os.replace(tmp, request)  # the evaluator polls for the name: it must appear whole
    return asked


def seal_answer(answer: Answer, outbox: Path, evaluations_dir: Path) -> None:
    """Copy the answer's files from the evaluator's outbox into the result, where no
    container writes: what is scored later is what the evaluator answered now. The
    names are the runner's; each must be a regular file under the size limit (not a
    link the evaluator made). A missing provenance record is left for its check."""
    for relative in [*answer.files.values(), *([answer.provenance] if answer.provenance else [])]:
        source, target = outbox / relative, evaluations_dir / relative
        if relative == answer.provenance and not os.path.lexists(source):
            continue
        try:
            src, size = open_regular(source, MAX_ANSWER_FILE_BYTES, f"the evaluator's {relative}")
        except UnsafeEntryFile as exc:
            raise EvaluatorError(str(exc)) from None
        target.parent.mkdir(parents=True, exist_ok=True)
        with src:
            copy_limited(src, size, target, lambda chunk: None)


class Evaluator:
    """The evaluator's lifecycle and its requests, from its parts: the container's spec
    (``evaluator_spec``), what it has said (``_Progress``), its freezes (``_Freezer``), the
    request files (``_request_body``, ``_write_request``) and the sealed answers
    (``seal_answer``)."""

    def __init__(self, engine: Engine, plan: SeedRun, extra_inputs: dict[str, Path] | None = None):
        """``plan``: one run's plan (``ResolvedPlan.for_run``): its image, builder, evaluation data,
        probe inputs, limits and folders. ``extra_inputs``: more input sets by name (a study's
        second test sets, ``runner study generalization``), each a folder holding the set's
        ``images.npy``, predicted with the clean set at every request that is not a
        sensitivity check."""
        self.engine = engine
        self.plan = plan
        self.extra_inputs = dict(extra_inputs or {})
        self.builder_limit_s = plan.entry.inference.builder_seconds
        self.progress = _Progress()
        self.freezer = _Freezer()
        self._outcome: ContainerOutcome | None = None
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._container_started = threading.Event()
        self.frozen_at: float | None = None  # host monotonic time a prestarted one was first frozen

    @property
    def ready_at(self) -> float | None:
        """Host monotonic time the evaluator first said it was ready."""
        return self.progress.ready_at

    # -- lifecycle ----------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._outcome = run_container(
                self.engine, evaluator_spec(self.plan, self.extra_inputs), self.progress.see,
                self.plan.log("evaluator.log"), cancel=self._cancel, on_started=self._started,
            )
        except EngineError as exc:
            self.progress.errors.append(f"engine error: {exc}")
        finally:
            with self.progress.changed:
                self.progress.changed.notify_all()

    def _started(self, container: Container, clock: Callable[[], float]) -> None:
        self.freezer.container = container
        self.progress.cpu = ContainerCpu(container)
        self.progress.cpu.seconds()  # finds the counter now, not while an answer's line is handled
        self._container_started.set()

    def _why_gone(self) -> str:
        why = "; ".join(self.progress.errors) or (self._outcome.reason() if self._outcome else None)
        return why or "the evaluator exited"

    def _launch(self) -> None:
        for folder in (self.plan.checkpoints_dir, self.plan.requests_dir,
                       self.plan.log("evaluator.log").parent):
            folder.mkdir(parents=True, exist_ok=True)
        for stale in self.plan.requests_dir.iterdir():  # a stopped evaluator's requests
            stale.unlink()
        self.progress.restart()
        self._outcome, self.freezer.paused, self.freezer.closing = None, False, False
        self._cancel = threading.Event()
        self._container_started.clear()
        prepare_writable(self.plan.evaluator_outbox)
        self._thread = threading.Thread(target=self._run, name="runner-evaluator", daemon=True)
        self._thread.start()

    def _wait_ready(self) -> None:
        ok = self.progress.wait_until(lambda: self.progress.ready or not self.started, READY_TIMEOUT_S)
        if not (ok and self.progress.ready):
            self.close()
            raise EvaluatorError(f"the evaluator could not start: {self._why_gone()}")

    def start(self) -> None:
        """Start the evaluator and wait until it is ready (then frozen until the first request)."""
        self._launch()
        self._wait_ready()
        self.freezer.pause(self.started)

    def prestart(self) -> None:
        """Start the evaluator's container and return once it runs, without waiting for it to
        be ready: it gets ready beside the entry's start-up at the lowest CPU weight and is
        frozen as soon as it says so (or after ``READY_GRACE_S``). Its head start matters:
        once the entry's threads are busy, the lowest weight gets next to nothing. One that
        cannot start says why at the first request."""
        self.launch()
        self.until_running()

    def launch(self) -> None:
        """``prestart``'s first half: the container is created and started in the background.
        The training's container is created meanwhile (``run_container``'s ``before_start``
        waits for ``until_running``): the two creations overlap, the starts keep their order."""
        self._launch()

    def until_running(self) -> None:
        """``prestart``'s second half: return once the container runs (or could not start),
        and freeze it as soon as it is ready."""
        while not self._container_started.wait(timeout=0.05):
            if not self.started:
                return
        threading.Thread(target=self._freeze_when_ready, name="runner-evaluator-ready", daemon=True).start()

    def _freeze_when_ready(self) -> None:
        """(Started by ``prestart`` once the container runs.)"""
        deadline = time.monotonic() + READY_GRACE_S
        self.progress.wait_until(lambda: self.progress.ready or self.freezer.asking or not self.started,
                                 max(0.0, deadline - time.monotonic()))
        self.freezer.pause(self.started)
        if self.freezer.paused and self.frozen_at is None:
            self.frozen_at = time.monotonic()

    def stay_awake(self) -> None:
        """The entry's containers are gone: nothing of the entry runs on a clock any more, so
        the evaluator is no longer frozen between requests (two engine round trips each), and
        it gets the engine's default CPU weight back: at the lowest, the host's own work
        (the engine cleaning up the training container, the runner's threads) would come
        first and stretch every forward pass."""
        self.freezer.flag(awake=True)
        self.freezer.resume()
        if self.freezer.container is not None:
            try:
                self.engine.set_cpu_weight(self.freezer.container, DEFAULT_CPU_WEIGHT)
            except EngineError:
                pass  # gone, or an engine that cannot change it live: only slower

    @property
    def started(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self, at_once: bool = False) -> None:
        """Stop the evaluator. Every answer it gave is on disk before it said so, so it is
        killed rather than asked to exit (an interpreter holding a framework takes over half
        a second to tear down); ``at_once``: also when a request is in flight."""
        if self._thread is None:
            return
        self.freezer.flag(closing=True)  # no freeze after this: a paused container cannot be killed
        self.freezer.resume()
        if self.freezer.container is not None and self._thread.is_alive():
            try:
                self.freezer.container.stop()
            except EngineError:
                pass  # exited or being removed
            self._thread.join(timeout=10)
        if self._thread.is_alive():
            self._cancel.set()
            self._thread.join(timeout=30)

    # -- one evaluation -----------------------------------------------------------------
    def evaluate(self, index: int, checkpoint_name: str, shuffle_seed: int | None = None,
                 items: int | None = None, probe_items: tuple[int, int] | None = None,
                 weights: bool = False) -> Answer:
        """Predictions for ``checkpoints_dir/checkpoint_name``: of the clean set and the probe
        where the run has one, the probe cut to ``probe_items`` (size, seed);
        with ``shuffle_seed``, for the same model after the checkpoint's tensors were permuted
        (clean set only, ``items`` of it)."""
        if not self.started:
            self.start()
        self.freezer.flag(asking=True)
        with self.progress.changed:
            self.progress.changed.notify_all()
        try:
            self.freezer.resume()
            if not self.progress.ready:  # prestarted and still starting: its start-up is not the builder's
                self._wait_ready()
            asked = _write_request(self.plan.requests_dir, index,
                                   _request_body(checkpoint_name, shuffle_seed, items, probe_items, weights))
            return self._answer(index, asked, shuffle_seed, weights)
        finally:
            self.freezer.flag(asking=False)
            self.freezer.pause(self.started)

    def _wait_built(self, index: int, asked: float) -> None:
        """Wait for request ``index``'s model to be built (or its failure); past the builder's
        limit the evaluator is stopped and the evaluation fails, saying so."""
        limit = self.builder_limit_s
        built, late = self.progress.wait_built(index, limit, lambda: self.started)
        if late or (built is not None and built[0] - asked > limit):
            self.close(at_once=True)  # the builder is still working: nothing of it may go on
            raise EvaluatorError(
                f"the builder took more than {limit:g} s to build the model and load the checkpoint "
                f"(limit {limit:g} s: inference.builder_seconds, capped by the run contract)"
            )

    def _wait_done(self, index: int) -> None:
        """Wait for request ``index``'s answer; an evaluation that failed, or none, is an error."""
        answered, failure = self.progress.wait_answer(index, EVALUATION_TIMEOUT_S, lambda: self.started)
        if not answered:
            if not self.started:
                raise EvaluatorError(f"the evaluator stopped: {self._why_gone()}")
            raise EvaluatorError(f"the evaluator gave no answer within {EVALUATION_TIMEOUT_S:.0f} s")
        if failure is not None:
            raise EvaluatorError(failure)

    def _answer(self, index: int, asked: float, shuffle_seed: int | None, weights: bool) -> Answer:
        """Request ``index``'s answer (written at ``asked``), once given, sealed into the result."""
        self._wait_built(index, asked)
        self._wait_done(index)
        files, provenance = _answer_files(self.plan, self.extra_inputs, index, shuffle_seed)
        answer = self.progress.answer(index, asked, files, provenance)
        seal_answer(answer, self.plan.evaluator_outbox, self.plan.evaluations_dir)
        if weights:
            from runner.score.weights_dump import copy_dump  # lazy: start-up (runner --help)

            answer.weights = copy_dump(self.plan.evaluator_outbox, self.plan.evaluations_dir, index)
        return answer
