"""The runner's evaluator: a second locked-down container, from the entry's image, that
computes predictions for the checkpoints the entry asks to have evaluated.

It gets the evaluation inputs and the runner's perturbed probe inputs, the runner's
copies of the checkpoints (read-only), and a folder for its predictions; no labels, no
training data, no network, no view of the training container. It is started on the first
request (its start-up is then inside the first frozen window) and kept waiting, so each
later evaluation costs only its forward passes. Between requests it is paused (the same
cgroup freezer as the training container): it runs the entry's builder, and nothing of the
entry may run on the clock outside its training container, nor take its cores.

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

import docker

from runner import paths
from runner.run.gpu_freeze import run_gpu_indices
from runner.engine.containers import ContainerOutcome, ContainerSpec, Mount, prepare_writable, run_container
from runner.events import parse_line
from runner.plan import RunPlan

HARNESS_MOUNT = "/opt/runner/harness"
READY_TIMEOUT_S = 300.0
EVALUATION_TIMEOUT_S = 1800.0


def evaluator_device_args(framework: str, gpus: int) -> list[str]:
    """A run with GPUs evaluates on them: the PyTorch loader is told to use CUDA (and fails the
    evaluation, saying so, when the container sees no GPU). Other frameworks place their
    models themselves."""
    return ["--device", "cuda"] if gpus and framework == "pytorch" else []


class EvaluatorError(Exception):
    """The evaluator could not give predictions for a request; the message says why."""


@dataclass
class Answer:
    """What one evaluation gave: predictions per input set, the provenance record, and the
    builder's time as the host measured it (request written -> model built)."""

    files: dict[str, str]  # set name -> path relative to the evaluations folder
    builder_seconds: float | None = None
    provenance: str | None = None  # relative to the evaluations folder
    notes: dict = field(default_factory=dict)
    predict_seconds: float | None = None  # model built -> answer, host clock (bounded after inference)


class Evaluator:
    def __init__(self, client: docker.DockerClient, plan: RunPlan):
        """``plan``: one run's plan (``RunPlan.for_run``): its image, builder, evaluation data,
        probe inputs, limits and folders."""
        self.client = client
        self.plan = plan
        self.builder_limit_s = plan.entry.inference.builder_seconds
        self._changed = threading.Condition()
        self._ready = False
        self._answers: dict[int, str | None] = {}  # index -> None (done) or the failure
        self._built: dict[int, tuple[float, dict]] = {}  # index -> (host monotonic time, its event)
        self._done_at: dict[int, float] = {}  # index -> host monotonic time of its answer
        self._outcome: ContainerOutcome | None = None
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._errors: list[str] = []
        self._container = None
        self._paused = False

    # -- lifecycle ----------------------------------------------------------------------
    def _spec(self) -> ContainerSpec:
        plan, limits = self.plan, self.plan.limits
        framework = plan.entry.framework["name"]
        mounts = [
            Mount(paths.harness_dir(), HARNESS_MOUNT),
            Mount(plan.data.eval_dir, "/data/eval"),
            Mount(plan.checkpoints_dir, "/checkpoints"),
            Mount(plan.requests_dir, "/requests"),
            Mount(plan.evaluations_dir, "/evaluations", read_only=False),
        ]
        input_sets = ["clean=/data/eval"]
        if plan.probe_dir is not None:
            mounts.append(Mount(plan.probe_dir, "/data/probe"))
            input_sets.append("probe=/data/probe")
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
            },
            cpus=limits.cpus,
            memory=limits.memory,
            # The run's GPUs, by the ids the training container has (``--gpus N``: 0..N-1).
            gpu_ids=[str(g) for g in run_gpu_indices(limits.gpus)] or None,
            timeout_s=limits.evaluator_timeout_s,
            label="evaluator",
        )

    def _on_line(self, line: str, t: float) -> None:
        if line.startswith("harness: error:"):
            self._errors.append(line.removeprefix("harness: error:").strip())
        ev = parse_line(line, 0, t)
        if ev is None:
            return
        with self._changed:
            if ev.key == "evaluator_ready":
                self._ready = True
            elif ev.key == "model_built":
                index = ev.metadata.get("index")
                if isinstance(index, int) and index not in self._built:
                    self._built[index] = (time.monotonic(), dict(ev.metadata))
            elif ev.key in ("evaluation_done", "evaluation_failed"):
                index = ev.metadata.get("index")
                if isinstance(index, int):
                    self._done_at.setdefault(index, time.monotonic())
                    failure = ev.metadata.get("message") if ev.key == "evaluation_failed" else None
                    self._answers[index] = str(failure or "failed") if ev.key == "evaluation_failed" else None
            self._changed.notify_all()

    def _run(self) -> None:
        try:
            self._outcome = run_container(
                self.client, self._spec(), self._on_line, self.plan.log("evaluator.log"), cancel=self._cancel,
                on_started=self._started,
            )
        except docker.errors.DockerException as exc:
            self._errors.append(f"engine error: {exc}")
        finally:
            with self._changed:
                self._changed.notify_all()

    def _started(self, container, clock) -> None:
        self._container = container

    def _pause(self) -> None:
        """Freeze the waiting evaluator until the next request (it holds the entry's code)."""
        if self._container is None or self._paused or not self.started:
            return
        try:
            self._container.pause()
            self._paused = True
        except docker.errors.APIError:
            pass  # exited or being removed: nothing left to run

    def _resume(self) -> None:
        if not self._paused:
            return
        self._paused = False
        try:
            self._container.unpause()
        except docker.errors.APIError:
            pass

    def _why_gone(self) -> str:
        why = "; ".join(self._errors) or (self._outcome.reason() if self._outcome else None)
        return why or "the evaluator exited"

    def start(self) -> None:
        for folder in (self.plan.checkpoints_dir, self.plan.requests_dir,
                       self.plan.log("evaluator.log").parent):
            folder.mkdir(parents=True, exist_ok=True)
        for stale in self.plan.requests_dir.iterdir():  # a stopped evaluator's requests
            stale.unlink()
        self._ready, self._outcome, self._errors = False, None, []
        self._cancel = threading.Event()
        prepare_writable(self.plan.evaluations_dir)
        self._thread = threading.Thread(target=self._run, name="runner-evaluator", daemon=True)
        self._thread.start()
        with self._changed:
            ok = self._changed.wait_for(
                lambda: self._ready or not self._thread.is_alive(), timeout=READY_TIMEOUT_S
            )
        if not (ok and self._ready):
            self.close()
            raise EvaluatorError(f"the evaluator could not start: {self._why_gone()}")
        self._pause()

    @property
    def started(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def close(self, at_once: bool = False) -> None:
        if self._thread is None:
            return
        self._resume()
        if not at_once:
            (self.plan.requests_dir / "stop").touch()
            self._thread.join(timeout=10)
        if self._thread.is_alive():
            self._cancel.set()
            self._thread.join(timeout=30)

    # -- one evaluation -----------------------------------------------------------------
    def evaluate(self, index: int, checkpoint_name: str, shuffle_seed: int | None = None,
                 items: int | None = None) -> Answer:
        """Predictions for ``checkpoints_dir/checkpoint_name``; with ``shuffle_seed``, for the
        same model after the checkpoint's tensors were permuted (clean set only)."""
        if not self.started:
            self.start()
        try:
            return self._ask(index, checkpoint_name, shuffle_seed, items)
        finally:
            self._pause()

    def _ask(self, index: int, checkpoint_name: str, shuffle_seed: int | None, items: int | None) -> Answer:
        self._resume()
        request = self.plan.requests_dir / f"{index}.json"
        tmp = request.with_suffix(".tmp")
        body = {"checkpoint": f"/checkpoints/{checkpoint_name}"}
        if shuffle_seed is not None:
            body["shuffle_seed"] = int(shuffle_seed)
            if items:
                body["items"] = int(items)
        tmp.write_text(json.dumps(body))
        asked = time.monotonic()
        os.replace(tmp, request)  # the evaluator polls for the name: it must appear whole
        limit = self.builder_limit_s
        with self._changed:
            self._changed.wait_for(
                lambda: index in self._built or index in self._answers or not self._thread.is_alive(),
                timeout=limit,
            )
            built = self._built.get(index)
            late = built is None and index not in self._answers and self._thread.is_alive()
        if late or (built is not None and built[0] - asked > limit):
            self.close(at_once=True)  # the builder is still working: nothing of it may go on
            raise EvaluatorError(
                f"the builder took more than {limit:g} s to build the model and load the checkpoint "
                f"(limit {limit:g} s: inference.builder_seconds, capped by the run contract)"
            )
        with self._changed:
            self._changed.wait_for(
                lambda: index in self._answers or not self._thread.is_alive(),
                timeout=EVALUATION_TIMEOUT_S,
            )
            if index not in self._answers:
                if not self._thread.is_alive():
                    raise EvaluatorError(f"the evaluator stopped: {self._why_gone()}")
                raise EvaluatorError(f"the evaluator gave no answer within {EVALUATION_TIMEOUT_S:.0f} s")
            failure = self._answers[index]
        if failure is not None:
            raise EvaluatorError(failure)
        names = ["clean"] + (["probe"] if self.plan.probe_dir is not None and shuffle_seed is None else [])
        seconds = round(built[0] - asked, 6) if built is not None else None
        predict = round(self._done_at[index] - built[0], 6) if built is not None and index in self._done_at else None
        notes = {k: v for k, v in (built[1] if built else {}).items() if k == "shuffled_tensors" and isinstance(v, int)}
        suffix = "json" if self.plan.entry.task.inputs == "questions" else "npy"
        return Answer({name: f"{index}/{name}.{suffix}" for name in names}, seconds,
                      None if shuffle_seed is not None else f"{index}/provenance.json", notes, predict)
