"""The trained models' checks after training (nothing here is on the clock): the final
model's evaluation, and the sensitivity checks of the crossing checkpoint and the final
model (their tensors permuted).

``runner reproduce`` runs them once the training container has exited. The final model's
evaluation serves one purpose: to check the model a backend times (it must meet the
threshold in the evaluator's hands too, be the model the evaluator scored, take its
knowledge from its own tensors). A run that times no model (``--no-infer``) copies and
hashes its final model all the same (the digest the result keeps) but does not evaluate it;
``runner reinfer`` evaluates that copy (``evaluate_deferred``) before it times the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from runner.engine.interface import Engine
from runner.plan import EVALUATIONS_DIR, SeedRun
from runner.run.checkpoints import CheckpointError, copy_checkpoint
from runner.run.evaluator import Answer, Evaluator, EvaluatorError
from runner.score.probe import PROBE_ITEMS
from runner.errors import RunnerError

# The permuted-checkpoint check predicts this many evaluation items, drawn by the run's seed:
# a permuted model keeps its accuracy or falls to chance, and 2,000 items tell the two apart
# by tens of standard errors (the whole set cost a second more per run, after training).
SENSITIVITY_ITEMS = 2000
DEFERRED = ("not evaluated: this run timed no model (--no-infer); "
            "`runner reinfer` evaluates it from the copy with this sha256 before timing it")


def answer_fields(answer: Answer, probe_subset: tuple[int, int] | None) -> dict:
    """A record's fields for the evaluator's answer: its predictions, the probe's (with the
    items it drew), the builder's and the predictions' times, the provenance record."""
    fields: dict[str, Any] = {"predictions": f"{EVALUATIONS_DIR}/{answer.files['clean']}"}
    if "probe" in answer.files:
        fields["probe_predictions"] = f"{EVALUATIONS_DIR}/{answer.files['probe']}"
        if probe_subset:
            fields["probe_items"], fields["probe_seed"] = probe_subset
    fields["builder_seconds"] = answer.builder_seconds
    fields["predict_seconds"] = answer.predict_seconds
    if answer.predict_cpu_seconds is not None:  # the evaluator's cgroup, read by the host
        fields["predict_cpu_seconds"] = answer.predict_cpu_seconds
    fields["provenance"] = f"{EVALUATIONS_DIR}/{answer.provenance}" if answer.provenance else None
    return fields


def probe_subset(task, labels, seed: int) -> tuple[int, int] | None:
    """(items, seed) of the probe's images a request predicts (a smaller set: all of them);
    None: every item (questions)."""
    if task.inputs != "images":
        return None
    return min(PROBE_ITEMS, len(labels)), seed


def final_copy_name(weights: str) -> str:
    """The runner's copy of the final model under checkpoints/."""
    return f"final{Path(weights).suffix[:16]}"


def evaluate_final(evaluator: Evaluator, plan: SeedRun, index: int, probe_subset: tuple[int, int] | None,
                   evaluate: bool = True) -> tuple[dict | None, str | None]:
    """(the final model's record, the runner's copy when it was evaluated). The entry's
    final weights are copied and hashed; with ``evaluate``, the copy is predicted (the clean
    set and the probe in one request). None: the entry left no final weights."""
    weights = plan.entry.final_weights
    if not (plan.output_dir / weights).is_file():
        return None, None
    record: dict = {"index": index, "weights": weights}
    name = final_copy_name(weights)
    try:
        plan.checkpoints_dir.mkdir(exist_ok=True)
        record["sha256"] = copy_checkpoint(plan.output_dir, weights, plan.checkpoints_dir / name)
        if not evaluate:
            record["deferred"] = DEFERRED
            return record, None
        record.update(answer_fields(evaluator.evaluate(index, name, probe_items=probe_subset), probe_subset))
        return record, name
    except (CheckpointError, EvaluatorError, OSError) as exc:
        record["problem"] = str(exc)
        return record, None


def evaluate_sensitivity(evaluator: Evaluator, plan: SeedRun, jobs: list[tuple[str, int | None, str]],
                         first_index: int) -> list[dict]:
    """Each ``(of, evaluation, copy)`` once more with its checkpoint's tensors permuted: a
    model that still scores well did not take its knowledge from its checkpoint."""
    records = []
    for k, (of, evaluation, name) in enumerate(jobs):
        index = first_index + k
        record: dict = {"of": of, "evaluation": evaluation, "index": index,
                        "shuffle_seed": plan.sensitivity_seed}
        if plan.entry.task.inputs == "images":
            record["items"] = SENSITIVITY_ITEMS
        try:
            # their tensors too: the comparison across seeds (runner.score.across_runs, the crossing's)
            # and the descent from the runner's initial weights (runner.score.descent, both)
            answer = evaluator.evaluate(index, name, shuffle_seed=plan.sensitivity_seed, items=record.get("items"),
                                        weights=True)
            record["predictions"] = f"{EVALUATIONS_DIR}/{answer.files['clean']}"
            record["builder_seconds"] = answer.builder_seconds
            record.update(answer.notes)
            if answer.weights is not None:
                record["weights"] = answer.weights
        except EvaluatorError as exc:
            record["problem"] = str(exc)
        records.append(record)
    return records


def evaluate_deferred(engine: Engine, plan: SeedRun, source_output: Path, record: dict,
                      probe_subset: tuple[int, int] | None, sensitivity_index: int) -> tuple[dict, dict]:
    """The evaluation a ``--no-infer`` run deferred: the final model in ``source_output``
    (the result's output/, which must still hold the bytes whose sha256 the run recorded),
    copied into ``plan``'s folders, evaluated at the index the run reserved for it, and its
    sensitivity check. Returns (the final model's record, its sensitivity record); raises
    ``DeferredError`` when the model is not the one the run produced or cannot be evaluated."""
    name = final_copy_name(record["weights"])
    plan.checkpoints_dir.mkdir(parents=True, exist_ok=True)
    try:
        digest = copy_checkpoint(source_output, record["weights"], plan.checkpoints_dir / name)
    except (CheckpointError, OSError) as exc:
        raise DeferredError(f"the final model cannot be copied: {exc}") from None
    if digest != record.get("sha256"):
        raise DeferredError(f"output/{record['weights']} has sha256 {digest[:16]}, not the "
                            f"{str(record.get('sha256'))[:16]} the run recorded: it is not the model the run produced")
    evaluator = Evaluator(engine, plan)
    try:
        try:
            answer = evaluator.evaluate(record["index"], name, probe_items=probe_subset)
        except EvaluatorError as exc:
            raise DeferredError(f"the evaluator could not evaluate the final model: {exc}") from None
        final = {k: v for k, v in record.items() if k != "deferred"}
        final.update(answer_fields(answer, probe_subset))
        (sensitivity,) = evaluate_sensitivity(evaluator, plan, [("final", None, name)], sensitivity_index)
    finally:
        evaluator.close()
    return final, sensitivity


class DeferredError(RunnerError):
    """The deferred evaluation of a final model could not be made; the message says why."""

    default_fix = ("read the evaluator's log in the result folder; the final checkpoint must be a regular file "
                   "inside /output that the entry's builder loads")
