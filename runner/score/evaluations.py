"""Score every evaluation the runner made, from the harness' predictions files, against
the runner's own labels; and the same checkpoint on the perturbed probe inputs."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from runner.events import bounded_json
from runner.score.probe import probe_subset
from runner.safe_npy import load_npy
from runner.score.tta import Timeline
from runner.tasks import Task


@dataclass
class ScoredEvaluation:
    index: int
    epoch: int | None
    start: float
    stop: float
    predictions: str
    count: int | None  # rows in the predictions file; None when unreadable
    scores: dict[str, float]
    meets: bool
    problem: str | None = None  # why this evaluation could not be scored
    checkpoint: str | None = None
    checkpoint_sha256: str | None = None
    excluded: bool = True
    probe_scores: dict[str, float] | None = None  # the generalization probe
    probe_gap: float | None = None  # primary score minus the probe's
    probe_predictions: str | None = None
    builder_seconds: float | None = None  # request -> model built (host clock), bounded
    provenance: str | None = None  # the evaluator's record of the tensors the model computed with
    gpu_tail_seconds: float = 0.0  # the busy GPU tail after the pause, counted as training (class 2c)
    predict_seconds: float | None = None  # model built -> predictions written (host clock), bounded
    probe_items: int | None = None  # the probe predicted this many items, drawn by probe_seed
    probe_seed: int | None = None
    cpu_seconds: float | None = None  # the training containers' CPU time at the freeze (cgroups)
    gpu_work_seconds: float | None = None  # ... and the run's GPUs' busy time
    predict_cpu_seconds: float | None = None  # the evaluator's CPU time to predict (its cgroup)

    def to_dict(self) -> dict:
        record = asdict(self)
        if not self.gpu_tail_seconds:  # runs without GPUs keep the records they always had
            del record["gpu_tail_seconds"]
        # a probe of every item (or none) records neither; unmeasured work is not recorded
        for key in ("probe_items", "probe_seed", "cpu_seconds", "gpu_work_seconds", "predict_cpu_seconds"):
            if record[key] is None:
                del record[key]
        return record


MAX_JSON_PREDICTIONS_BYTES = 256 << 20


def path_problem(relative: object) -> str | None:
    """Why an entry-given path cannot name a file (None when it can)."""
    if not isinstance(relative, str) or not relative:
        return f"predictions path {relative!r} is not a file name"
    if len(relative) > 1024 or any(ord(c) < 32 or c == "\x7f" for c in relative):
        return f"predictions path {relative[:80]!r} holds control characters or is too long"
    return None


def resolve_inside(root: Path, relative: str) -> Path | None:
    """``root/relative`` if it stays inside ``root``; None for a path that escapes it
    or cannot be a path at all (a NUL byte, a name too long)."""
    if path_problem(relative):
        return None
    try:
        path = (root / relative).resolve()
    except (OSError, ValueError, RuntimeError):
        return None
    return path if path.is_relative_to(root.resolve()) else None


def backend_predictions_name(task: Task) -> str:
    """The file a timed backend writes its answers to: class rows, or ``{id: answer}``."""
    return "predictions.json" if getattr(task, "inputs", "images") == "questions" else "predictions.npy"


def load_predictions(path: Path) -> np.ndarray | dict:
    """An entry's (or a bundle's) predictions, read within limits: ValueError otherwise."""
    if path.suffix == ".json":
        if path.stat().st_size > MAX_JSON_PREDICTIONS_BYTES:
            raise ValueError(f"over {MAX_JSON_PREDICTIONS_BYTES} bytes")
        answers = bounded_json(path.read_text(encoding="utf-8", errors="replace"))
        if not isinstance(answers, dict):  # a question task's answers are {id: answer}
            raise ValueError("not a JSON object of answers")
        return answers
    return load_npy(path)


def score_predictions(task: Task, preds, labels) -> tuple[int, dict[str, float], str | None]:
    """(count, scores, problem). A count that differs from the labels' scores nothing."""
    expected = len(labels)
    count = len(preds)
    if count != expected:
        return count, {}, f"{count} predictions for an evaluation set of {expected}"
    return count, task.score(preds, labels), None


def primary_score(task: Task, scores: dict[str, float]) -> float | None:
    return scores.get(task.metric)


def score_file(task: Task, root: Path, relative: str, labels, rows=None):
    """(count, scores, problem) for one predictions file under ``root``; with ``rows``
    (item indices), of those rows of a whole-set file, against the same labels."""
    if problem := path_problem(relative):
        return None, {}, problem
    path = resolve_inside(root, relative)
    if path is None:
        return None, {}, f"predictions path {relative!r} leaves the result folder"
    if not path.is_file():
        return None, {}, f"predictions file {relative} is missing"
    try:
        preds = load_predictions(path)
        if rows is not None:
            if len(preds) != len(labels):
                return len(preds), {}, f"{len(preds)} predictions for an evaluation set of {len(labels)}"
            preds, labels = preds[rows], labels[rows]
        return score_predictions(task, preds, labels)
    except (ValueError, OSError, TypeError, MemoryError, IndexError) as exc:
        return None, {}, f"predictions file {relative} is unreadable: {exc}"


def probe_scores(task: Task, root: Path, clean: str, probe: str, labels, items=None, seed=None):
    """(the probe's scores, the gap: the clean primary score minus the probe's, on the same
    items; None where either cannot be scored). A probe of ``items`` drawn by ``seed``
    (``score.probe.probe_subset``) is scored against those items' labels, and so is the clean
    set for its side of the gap."""
    rows = probe_subset(len(labels), items, seed) if labels is not None else None
    if rows is None:
        _, clean_scores, clean_problem = score_file(task, root, clean, labels)
        _, scores, problem = score_file(task, root, probe, labels)
    else:
        _, clean_scores, clean_problem = score_file(task, root, clean, labels, rows)
        _, scores, problem = score_file(task, root, probe, labels[rows])
    value, probe_value = primary_score(task, clean_scores), primary_score(task, scores)
    if problem or clean_problem or value is None or probe_value is None:
        return scores or None, None
    return scores, round(value - probe_value, 6)


def score_evaluations(task: Task, line: Timeline, result_dir: Path, labels) -> list[ScoredEvaluation]:
    scored: list[ScoredEvaluation] = []
    for ev in line.evaluations:
        if ev.problem is not None:  # the runner could not evaluate it: nothing to score
            count, scores, problem = None, {}, ev.problem
        else:
            count, scores, problem = score_file(task, result_dir, ev.predictions, labels)
        value = primary_score(task, scores)
        meets = problem is None and value is not None and task.meets(value)
        probe, probe_gap = None, None
        if ev.probe_predictions and problem is None:
            probe, probe_gap = probe_scores(task, result_dir, ev.predictions, ev.probe_predictions, labels,
                                            ev.probe_items, ev.probe_seed)
        scored.append(
            ScoredEvaluation(
                ev.index, ev.epoch, ev.start, ev.stop, ev.predictions, count, scores, meets, problem,
                ev.checkpoint, ev.checkpoint_sha256, ev.excluded, probe or None, probe_gap,
                ev.probe_predictions, ev.builder_seconds, ev.provenance, ev.gpu_tail_seconds,
                predict_seconds=ev.predict_seconds, probe_items=ev.probe_items, probe_seed=ev.probe_seed,
                cpu_seconds=ev.cpu_seconds, gpu_work_seconds=ev.gpu_work_seconds,
                predict_cpu_seconds=ev.predict_cpu_seconds,
            )
        )
    return scored
