"""The training section of a result, from the runner's own events and predictions:
scores, TTA, the launch stamp, the probe, and what makes the run non-conforming."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runner.events import RUNNER, Event
from runner.plan import SeedRun
from runner.results.record import Training
from runner.initial_weights import Tensor
from runner.score.curve import write_curve
from runner.score.descent import descent_of_run
from runner.score.evaluations import primary_score, probe_scores, score_evaluations, score_file
from runner.score.model_origin import (
    CLASS4,
    judge_sensitivity, provenance_problem, read_provenance, sensitivity_problem,
)
from runner.score.probe import probe_problem
from runner.score.training_evidence import training_evidence
from runner.tasks.base import IMAGES
from runner.score.tta import LAUNCH, LAUNCH_GAP_LIMIT_S, EventStreamError, time_to_accuracy, timeline
from runner.tasks import Task


@dataclass
class TrainingSummary:
    training: Training
    nonconforming: list[str] = field(default_factory=list)
    invalid: str | None = None  # why the run is invalid (its events do not form a run)


def final_record(task: Task, final: dict | None, result_dir: Path, labels) -> dict | None:
    """The evaluator's score of the final model (the timed model), probe included."""
    if final is None or "predictions" not in final:
        return final
    _, scores, problem = score_file(task, result_dir, final["predictions"], labels)
    record = {**final, "scores": scores, "problem": problem}
    if final.get("probe_predictions"):
        record["probe_scores"], record["probe_gap"] = probe_scores(
            task, result_dir, final["predictions"], final["probe_predictions"], labels,
            final.get("probe_items"), final.get("probe_seed"))
    return record


def _launch_problem(launch: Event, limit_s: float) -> str | None:
    if launch.metadata.get("stamp") == "launcher":
        return None
    late = launch.metadata.get("marker_at")
    if isinstance(late, float):
        return (f"class 1 (work before the clock): {late:.2f} s passed between the container's start and the "
                f"launcher's stamp (limit {limit_s:g} s); the clock started at the container's start")
    return ("class 1 (work before the clock): the runner's launcher did not speak first; "
            "the clock started at the container's start")


def model_origin(task: Task, scored: list, crossing: int | None, final: dict | None,
                 sensitivity: list[dict], result_dir: Path, labels, builder_limit_s: float | None):
    """The class 4 checks of the scored models: (record for result.json, non-conforming reasons)."""
    problems: list[str] = []
    provenance: dict = {}
    models = []
    if crossing is not None:
        models.append(("crossing", f"checkpoint {crossing}", scored[crossing].provenance, primary_score(task, scored[crossing].scores)))
    if final and "predictions" in final:
        models.append(("final", "the final model", final.get("provenance"),
                       primary_score(task, final.get("scores") or {})))
    own: dict[str, float | None] = {}  # each scored model's primary score, by its key
    for key, of, relative, score in models:
        found = read_provenance(result_dir, relative)
        provenance[key] = {"record": relative, "foreign_count": found.foreign_count,
                           "foreign_bytes": found.foreign_bytes, "foreign": found.foreign,
                           "small_constants_bytes": found.small_constants_bytes, "problem": found.problem}
        if problem := provenance_problem(found, of):
            problems.append(problem)
        own[key] = score
    judged = [judge_sensitivity(task, result_dir, r, own.get(str(r.get("of"))), labels) for r in sensitivity]
    for j in judged:
        if problem := sensitivity_problem(task, j):
            problems.append(problem)
    if not models:
        return None, problems
    times = [s.builder_seconds for s in scored if s.builder_seconds is not None]
    if final and isinstance(final.get("builder_seconds"), (int, float)):
        times.append(final["builder_seconds"])
    record = {
        "provenance": provenance,
        "sensitivity": judged,
        "builder_seconds": {"limit": builder_limit_s, "max": max(times, default=None),
                            "per_evaluation": [s.builder_seconds for s in scored]},
    }
    return record, problems


def summarize_training(plan: SeedRun, run, labels, train_samples: int | None = None) -> TrainingSummary:
    """The training section of one run (``plan``: its ``for_run`` plan) from what its training
    stage returned (``run``: a ``runner.run.training.TrainingRun``: its events, the
    container's outcome, notes, the final model's and the sensitivity evaluations), scored
    against the host's ``labels``; ``train_samples``: the staged training set's size (the
    evidence of training)."""
    task, result_dir, events = plan.entry.task, plan.result_dir, run.events
    builder_limit_s, final = plan.entry.inference.builder_seconds, run.final
    training = Training(wall_seconds=round(run.outcome.wall_seconds, 6), notes=list(run.notes))
    try:
        line = timeline(events)
    except EventStreamError as exc:
        return TrainingSummary(training, invalid=f"event stream: {exc}")

    scored = score_evaluations(task, line, result_dir, labels)
    tta = time_to_accuracy(line, [s.meets for s in scored])
    write_curve(result_dir / "curve.tsv", task, line, scored)
    launch = next(e for e in events if e.key == LAUNCH and e.origin == RUNNER)
    training.reached = tta.reached
    training.tta_seconds = tta.seconds
    training.tta_hours = tta.seconds / 3600 if tta.seconds is not None else None
    training.tta_resolution_seconds = tta.resolution_seconds
    training.launch_seconds = line.clock_start
    training.launch_stamp = launch.metadata.get("stamp")
    training.excluded_eval_seconds = tta.excluded_eval_seconds
    training.crossing = tta.crossing
    training.evaluations = [s.to_dict() for s in scored]
    training.final_model = final_record(task, final, result_dir, labels)
    if any(not e.excluded for e in line.evaluations):
        training.notes.append("the engine could not freeze the entry: evaluation time counts toward TTA")
    summary = TrainingSummary(training)
    if problem := _launch_problem(launch, LAUNCH_GAP_LIMIT_S):
        summary.nonconforming.append(problem)
    if tta.crossing is not None and (problem := probe_problem(scored[tta.crossing].probe_gap, task)):
        summary.nonconforming.append(problem)
    training.model_origin, problems = model_origin(task, scored, tta.crossing, training.final_model,
                                                   run.sensitivity or [], result_dir, labels, builder_limit_s)
    summary.nonconforming += problems
    if plan.initial and training.model_origin is not None:
        training.model_origin["descent"], problems = descent_of_run(
            result_dir, [Tensor(n, tuple(s), r) for n, s, r in plan.initial], plan.seed,
            plan.entry.framework["name"], task.descent.similarity, run.sensitivity or [], tta.crossing)
        summary.nonconforming += [CLASS4 + p for p in problems]
    training.evidence, problem = training_evidence(scored, tta.crossing, train_samples, len(labels),
                                                   judged=task.inputs == IMAGES, fraction=task.rules.evidence_fraction)
    if problem:
        summary.nonconforming.append(problem)
    return summary
