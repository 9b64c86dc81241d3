"""The training phase: run the entry's container under the contract and collect its
host-stamped events."""

from __future__ import annotations

import queue
import threading
from dataclasses import dataclass
from pathlib import Path

import docker

from runner.run.container import ContainerOutcome, ContainerSpec, Mount, prepare_writable, run_container
from runner.run.events import Event, parse_line
from runner.run.progress import TrainingProgress
from runner.score.evaluations import load_predictions, primary_score, resolve_inside, score_predictions
from runner.tasks import Task


@dataclass
class TrainingRun:
    events: list[Event]
    outcome: ContainerOutcome


@dataclass(frozen=True)
class TrainingInputs:
    image: str
    command: list[str]
    train_dir: Path
    eval_dir: Path
    result_dir: Path
    env: dict[str, str]
    cpus: float | None
    memory: str | int | None
    gpus: int
    timeout_s: float


def _listen(task: Task, labels, output_dir: Path, lines: queue.Queue, events: list[Event],
            progress: TrainingProgress) -> None:
    """Turn output lines into events. Runs beside the output reader, so scoring for the
    progress display never delays the timestamping of the next line."""
    while (item := lines.get()) is not None:
        line, t = item
        ev = parse_line(line, len(events), t)
        if ev is None:
            continue
        events.append(ev)
        if ev.key == "epoch_start" and isinstance(ev.metadata.get("epoch_num"), int):
            progress.update(epoch=ev.metadata["epoch_num"], elapsed=t)
        elif ev.key == "eval_stop":
            score = None
            path = resolve_inside(output_dir, str(ev.metadata.get("predictions", "")))
            if path is not None and path.is_file():
                try:
                    _, scores, _ = score_predictions(task, load_predictions(path), labels)
                    score = primary_score(task, scores)
                except (ValueError, OSError):
                    pass
            progress.update(elapsed=t, score=score, evaluated=True)
        else:
            progress.update(elapsed=t)


def run_training(client: docker.DockerClient, task: Task, labels, inputs: TrainingInputs) -> TrainingRun:
    output_dir = inputs.result_dir / "output"
    prepare_writable(output_dir)
    spec = ContainerSpec(
        image=inputs.image,
        command=inputs.command,
        mounts=[
            Mount(inputs.train_dir, "/data/train"),
            Mount(inputs.eval_dir, "/data/eval"),
            Mount(output_dir, "/output", read_only=False),
        ],
        env=inputs.env,
        cpus=inputs.cpus,
        memory=inputs.memory,
        gpus=inputs.gpus,
        timeout_s=inputs.timeout_s,
        label="train",
    )
    lines: queue.Queue = queue.Queue()
    events: list[Event] = []
    with TrainingProgress(task, "train") as progress:
        listener = threading.Thread(
            target=_listen, args=(task, labels, output_dir, lines, events, progress), daemon=True
        )
        listener.start()
        try:
            outcome = run_container(
                client, spec, lambda line, t: lines.put((line, t)),
                inputs.result_dir / "logs" / "train.log",
            )
        finally:
            lines.put(None)
            listener.join()
    return TrainingRun(events, outcome)
