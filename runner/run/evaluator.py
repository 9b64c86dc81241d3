"""The runner's evaluator: a second locked-down container, from the entry's image, that
computes predictions for the checkpoints the entry asks to have evaluated.

It gets the evaluation inputs and the runner's perturbed probe inputs, the runner's
copies of the checkpoints (read-only), and a folder for its predictions; no labels, no
training data, no network, no view of the training container. It is started on the first
request (its start-up is then inside the first frozen window) and kept waiting, so each
later evaluation costs only its forward passes.
"""

from __future__ import annotations

import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import docker

from runner import paths
from runner.run.container import ContainerOutcome, ContainerSpec, Mount, prepare_writable, run_container
from runner.events import parse_line

HARNESS_MOUNT = "/opt/runner/harness"
READY_TIMEOUT_S = 300.0
EVALUATION_TIMEOUT_S = 1800.0


class EvaluatorError(Exception):
    """The evaluator could not give predictions for a request; the message says why."""


@dataclass(frozen=True)
class EvaluatorInputs:
    image: str
    builder: str
    framework: str  # the manifest's framework name: picks the harness' loader
    eval_dir: Path
    probe_dir: Path | None
    checkpoints_dir: Path  # the runner's copies, host side
    evaluations_dir: Path  # where predictions land, host side
    requests_dir: Path  # host-only scratch: request files
    log_path: Path
    topk: int
    threads: int
    cpus: float | None
    memory: str | int | None
    gpus: int
    timeout_s: float


class Evaluator:
    def __init__(self, client: docker.DockerClient, inputs: EvaluatorInputs):
        self.client = client
        self.inputs = inputs
        self._changed = threading.Condition()
        self._ready = False
        self._answers: dict[int, str | None] = {}  # index -> None (done) or the failure
        self._outcome: ContainerOutcome | None = None
        self._thread: threading.Thread | None = None
        self._cancel = threading.Event()
        self._errors: list[str] = []

    # -- lifecycle ----------------------------------------------------------------------
    def _spec(self) -> ContainerSpec:
        i = self.inputs
        mounts = [
            Mount(paths.harness_dir(), HARNESS_MOUNT),
            Mount(i.eval_dir, "/data/eval"),
            Mount(i.checkpoints_dir, "/checkpoints"),
            Mount(i.requests_dir, "/requests"),
            Mount(i.evaluations_dir, "/evaluations", read_only=False),
        ]
        input_sets = ["clean=/data/eval"]
        if i.probe_dir is not None:
            mounts.append(Mount(i.probe_dir, "/data/probe"))
            input_sets.append("probe=/data/probe")
        return ContainerSpec(
            image=i.image,
            command=[
                "python3", "-m", "harness", "evaluate", "--entry-dir", "/entry",
                "--builder", i.builder, "--framework", i.framework, "--requests", "/requests", "--out", "/evaluations",
                "--inputs", *input_sets, "--topk", str(i.topk), "--threads", str(i.threads),
            ],
            mounts=mounts,
            env={
                "PYTHONPATH": "/opt/runner",
                "PYTHONDONTWRITEBYTECODE": "1",
                "OMP_NUM_THREADS": str(i.threads),
                "HOME": "/tmp",
            },
            cpus=i.cpus,
            memory=i.memory,
            gpus=i.gpus,
            timeout_s=i.timeout_s,
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
            elif ev.key in ("evaluation_done", "evaluation_failed"):
                index = ev.metadata.get("index")
                if isinstance(index, int):
                    failure = ev.metadata.get("message") if ev.key == "evaluation_failed" else None
                    self._answers[index] = str(failure or "failed") if ev.key == "evaluation_failed" else None
            self._changed.notify_all()

    def _run(self) -> None:
        try:
            self._outcome = run_container(
                self.client, self._spec(), self._on_line, self.inputs.log_path, cancel=self._cancel
            )
        except docker.errors.DockerException as exc:
            self._errors.append(f"engine error: {exc}")
        finally:
            with self._changed:
                self._changed.notify_all()

    def _why_gone(self) -> str:
        why = "; ".join(self._errors) or (self._outcome.reason() if self._outcome else None)
        return why or "the evaluator exited"

    def start(self) -> None:
        for folder in (self.inputs.checkpoints_dir, self.inputs.requests_dir):
            folder.mkdir(parents=True, exist_ok=True)
        prepare_writable(self.inputs.evaluations_dir)
        self._thread = threading.Thread(target=self._run, name="runner-evaluator", daemon=True)
        self._thread.start()
        with self._changed:
            ok = self._changed.wait_for(
                lambda: self._ready or not self._thread.is_alive(), timeout=READY_TIMEOUT_S
            )
        if not (ok and self._ready):
            self.close()
            raise EvaluatorError(f"the evaluator could not start: {self._why_gone()}")

    @property
    def started(self) -> bool:
        return self._thread is not None

    def close(self) -> None:
        if self._thread is None:
            return
        (self.inputs.requests_dir / "stop").touch()
        self._thread.join(timeout=10)
        if self._thread.is_alive():
            self._cancel.set()
            self._thread.join(timeout=30)

    # -- one evaluation -----------------------------------------------------------------
    def evaluate(self, index: int, checkpoint_name: str) -> dict[str, str]:
        """Predictions for ``checkpoints_dir/checkpoint_name``: ``{set name: path relative
        to the evaluations folder}``."""
        if not self.started:
            self.start()
        request = self.inputs.requests_dir / f"{index}.json"
        tmp = request.with_suffix(".tmp")
        tmp.write_text(json.dumps({"checkpoint": f"/checkpoints/{checkpoint_name}"}))
        os.replace(tmp, request)  # the evaluator polls for the name: it must appear whole
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
        names = ["clean"] + (["probe"] if self.inputs.probe_dir is not None else [])
        return {name: f"{index}/{name}.npy" for name in names}
