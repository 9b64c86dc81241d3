"""Did the scored model come from the run? (threat-model class 4, judged on the host.)

Two checks of the checkpoint that crossed the threshold and of the final model:

* **Provenance.** The evaluator records every tensor the model computed with that is not a
  tensor of its checkpoint (``harness/provenance.py``); beyond the small-constant budget
  of the run contract the model is non-conforming, the tensors named with their sizes.
* **Sensitivity.** The evaluator predicts once more with the checkpoint's tensors permuted;
  the host scores those predictions against its own labels. A model whose knowledge is in
  its checkpoint falls to chance (a permuted network answers at random, often with one or
  two classes); one that keeps at least half of its margin over chance got its knowledge
  elsewhere (code, the builder, a hidden network). "Keeps" is judged with the item count in
  view: the permuted score must pass that limit by ``SENSITIVITY_Z`` standard errors of a
  score measured on that many items, so a small (smoke) evaluation set whose permuted model
  lands a little above the limit by the luck of a few hundred items is not a finding, while
  a model that keeps its score is one at any size. Chance is the better of guessing
  uniformly and always answering the most frequent classes of the evaluation set; for a
  task without classes it is the task's stated ``chance_score`` (SQuAD: F1 0.10, above
  what a span picked without reading the question scores on the dev set, a few points).

Both records are written by a process that ran the entry's builder: they are read as
untrusted input (bounded JSON, every field checked), and a missing or malformed record is
itself a finding. ``runner verify`` applies the same functions to the bundle's files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from runner.events import bounded_json
from runner.score.evaluations import primary_score, resolve_inside, score_file
from runner.score.training_evidence import predicted_items
from runner.tasks import Task

CLASS4 = "class 4 (a model trained before the run): "
MAX_RECORD_BYTES = 1 << 20
# A permuted checkpoint must lose more than this fraction of the model's margin over chance.
SENSITIVITY_MARGIN = 0.5
# ...and pass it by this many standard errors of a score on the items the evaluator predicted
# (one-sided; about one honest run in 700 would pass it by chance alone).
SENSITIVITY_Z = 3.0


def chance(task: Task, labels) -> float | None:
    """The primary score without looking at the input: the better of uniform guessing and
    always answering the ``topk`` most frequent classes; for tasks without classes the task's
    stated ``chance_score`` (None when it states none)."""
    if not task.num_classes:
        return getattr(task, "chance_score", None)

    counts = np.bincount(np.asarray(labels, dtype=np.int64).reshape(-1), minlength=task.num_classes)
    frequent = float(np.sort(counts)[::-1][:task.topk].sum() / max(1, counts.sum()))
    return max(min(1.0, task.topk / task.num_classes), frequent)


def sensitivity_limit(task: Task, labels, own_score: float | None) -> float | None:
    """The permuted score at or above which the model did not need its checkpoint."""
    c = chance(task, labels)
    if c is None or own_score is None:
        return None
    return c + SENSITIVITY_MARGIN * max(0.0, own_score - c)


def sensitivity_bound(limit: float | None, items: int | None) -> float | None:
    """The permuted score that shows, on ``items`` items, a true score above ``limit``: the
    limit plus ``SENSITIVITY_Z`` binomial standard errors at the limit (a fraction scored
    per item, accuracy or F1, varies no more than that)."""
    if limit is None or not items:
        return limit
    p = min(max(limit, 0.0), 1.0)
    return limit + SENSITIVITY_Z * (p * (1.0 - p) / items) ** 0.5


@dataclass
class Provenance:
    checked: bool
    foreign: list[dict]
    foreign_bytes: int
    foreign_count: int
    small_constants_bytes: int
    problem: str | None  # why the record could not be read


def read_provenance(result_dir: Path, relative: object) -> Provenance:
    """The evaluator's record, read within limits; never trusted beyond its listed tensors."""
    def unreadable(why: str) -> Provenance:
        return Provenance(False, [], 0, 0, 0, why)

    if not isinstance(relative, str):
        return unreadable("the evaluator wrote no provenance record")
    path = resolve_inside(result_dir, relative)
    if path is None or not path.is_file():
        return unreadable(f"the provenance record {relative} is missing")
    if path.stat().st_size > MAX_RECORD_BYTES:
        return unreadable(f"the provenance record {relative} is over {MAX_RECORD_BYTES} bytes")
    try:
        data = bounded_json(path.read_text(encoding="utf-8", errors="replace"))
    except ValueError as exc:
        return unreadable(f"the provenance record {relative} is unreadable: {exc}")
    if not isinstance(data, dict) or not isinstance(data.get("foreign"), list):
        return unreadable(f"the provenance record {relative} is malformed")
    foreign = []
    listed_bytes = 0  # the bytes of the tensors listed
    for item in data["foreign"][:50]:
        if not isinstance(item, dict):
            return unreadable(f"the provenance record {relative} is malformed")
        size = item.get("bytes")
        size = size if isinstance(size, int) and size >= 0 else 0
        listed_bytes += size
        foreign.append({"name": str(item.get("name"))[:200], "shape": item.get("shape") if isinstance(item.get("shape"), list) else None,
                        "dtype": str(item.get("dtype"))[:32], "bytes": size})
    count = data.get("foreign_count")
    total = data.get("foreign_bytes")
    small = (data.get("small_constants") or {}).get("bytes") if isinstance(data.get("small_constants"), dict) else 0
    return Provenance(
        True, foreign,
        total if isinstance(total, int) and total >= 0 else listed_bytes,
        max(count if isinstance(count, int) else 0, len(foreign)),
        small if isinstance(small, int) else 0, None,
    )


def provenance_problem(record: Provenance, of: str) -> str | None:
    """The non-conforming reason for one model (``of``: "checkpoint 3", "the final model")."""
    if record.problem:
        return f"{CLASS4}the provenance of {of} could not be established: {record.problem}"
    if not record.foreign_count:
        return None
    named = ", ".join(f"{f['name']} ({f['bytes']} bytes)" for f in record.foreign[:5])
    more = f" and {record.foreign_count - 5} more" if record.foreign_count > 5 else ""
    return (f"{CLASS4}the model computes with tensors that are not in its checkpoint ({of}): {named}{more}; "
            f"{record.foreign_bytes} bytes in all, beyond the run contract's small constants")


def judge_sensitivity(task: Task, result_dir: Path, record: dict, own_score: float | None, labels) -> dict:
    """``record`` (an evaluator sensitivity run) with its score, the limit and the finding."""
    c = chance(task, labels)
    limit = sensitivity_limit(task, labels, own_score)
    out = {**record, "chance": c, "limit": limit, "own_score": own_score, "score": None,
           "items_scored": None, "bound": None, "problem": record.get("problem")}
    if c is None:
        out["problem"] = out["problem"] or f"no sensitivity rule for {task.id} (no classes)"
        return out
    if out["problem"] is None:
        items, seed = record.get("items"), record.get("shuffle_seed")
        if isinstance(items, int) and not isinstance(items, bool) and items > 0 and isinstance(seed, int):
            from runner.harness.evaluate import sensitivity_items  # lazy: start-up (runner --help)

            labels = labels[sensitivity_items(len(labels), seed, items)]  # what the evaluator predicted
        _, scores, problem = score_file(task, result_dir, str(record.get("predictions")), labels)
        out["score"] = primary_score(task, scores)
        out["problem"] = problem
        out["items_scored"] = len(labels)
        out["bound"] = sensitivity_bound(limit, len(labels))
    return out


def sensitivity_problem(task: Task, judged: dict) -> str | None:
    of = "the crossing checkpoint" if judged.get("of") == "crossing" else "the final model"
    limit, score, own, c = judged.get("limit"), judged.get("score"), judged.get("own_score"), judged.get("chance")
    if c is None:
        return None
    if judged.get("problem"):
        return f"{CLASS4}the sensitivity of {of} to its checkpoint could not be measured: {judged['problem']}"
    if own is None or limit is None or score is None or own <= 2 * c:
        return None  # a model near chance holds no knowledge: there is nothing to explain
    bound = judged.get("bound")
    bound = bound if isinstance(bound, (int, float)) else limit  # a record from before the bound
    if score >= bound:
        items = judged.get("items_scored")
        on = f", {SENSITIVITY_Z:g} standard errors above it on {items} items: {bound:.4f}" if items else ""
        return (f"{CLASS4}the model does not depend on its checkpoint ({of}): {task.metric} {own:.4f} as trained, "
                f"{score:.4f} with the checkpoint's tensors permuted (limit {limit:.4f}: chance {c:.4f} plus half "
                f"the model's margin over it{on})")
    return None


# -- the timed model is the evaluated one -----------------------------------------------------
# The inference phase rebuilds the final model with the builder in a fresh container; a
# builder that knew where it ran could time another (smaller) network than the one the
# evaluator scored. Each backend's per-item answers must agree with the evaluator's
# predictions of the final model on all but this fraction of items (kernels, ONNX and
# fp16 differ only on near-ties).
MAX_TIMED_DISAGREEMENT = 0.01


def timed_disagreement(backend_predictions, final_predictions) -> float | None:
    """The fraction of items whose best class (or, for questions, whose answer) differs;
    None when the shapes do not fit."""
    if isinstance(backend_predictions, dict) or isinstance(final_predictions, dict):
        a, b = backend_predictions, final_predictions
        if not (isinstance(a, dict) and isinstance(b, dict)) or set(a) != set(b) or not a:
            return None
        return float(np.mean([a[k] != b[k] for k in a]))

    a, b = np.asarray(backend_predictions), np.asarray(final_predictions)
    if a.ndim == 0 or b.ndim == 0 or len(a) != len(b) or not len(a):
        return None
    first = lambda p: p.reshape(len(p), -1)[:, 0]  # noqa: E731 - top-1 of ranked top-k rows
    return float(np.mean(first(a) != first(b)))


def timed_model_problem(backend: str, disagreement: float | None) -> str | None:
    if disagreement is None:
        return None
    if disagreement > MAX_TIMED_DISAGREEMENT:
        return (f"class 5 (a different model at the end): the {backend} backend's answers differ from the "
                f"evaluator's predictions of the final model on {disagreement:.2%} of the items "
                f"(at most {MAX_TIMED_DISAGREEMENT:.0%}): the timed model is not the one that was scored")
    return None


# -- the evaluator's predictions take what the model's forward passes take ---------------------
# The evaluation window is excluded from the clock. A model that trains inside its own
# forward pass (on data the checkpoint carries) escapes the builder's bound: every tensor it
# uses is the checkpoint's, and a permuted checkpoint breaks it. What it cannot hide is
# time: an honest evaluator predicts its items in batches, never slower per item than the
# same model's batch-1 pass the inference phase times. Each evaluation up to the crossing
# must predict within PREDICT_FACTOR times that (all its input sets, at the slowest backend's
# mean latency: the two phases run at different moments, and a busy host slows one and not
# the other), or PREDICT_FLOOR_S, whichever is more.
PREDICT_FLOOR_S = 5.0
PREDICT_FACTOR = 2.0


def predict_allowance(inference: dict, items: int) -> tuple[float | None, str | None]:
    """(seconds an evaluation of ``items`` may take to predict, the backend it is priced at)."""
    means = [(r["latency_ms"]["mean"], name) for name, r in sorted(inference.items())
             if isinstance(r, dict) and r.get("passed_gate") and isinstance(r.get("latency_ms"), dict)
             and isinstance(r["latency_ms"].get("mean"), (int, float))]
    if not means:
        return None, None
    mean_ms, backend = max(means)
    return max(PREDICT_FLOOR_S, PREDICT_FACTOR * items * mean_ms / 1000), backend


def predict_time_problems(scored: list, crossing: int | None, inference: dict, eval_size: int) -> tuple[dict, list[str]]:
    """The evaluations up to the crossing whose prediction took longer than the model's own
    forward passes: (record, class 2 reasons)."""
    problems = []
    checked = []
    last = crossing if crossing is not None else len(scored) - 1
    for s in scored[:last + 1]:
        items = predicted_items(s, eval_size)
        allowance, backend = predict_allowance(inference, items)
        if allowance is None or s.predict_seconds is None:
            continue
        checked.append({"index": s.index, "predict_seconds": s.predict_seconds, "allowance": round(allowance, 6),
                        "priced_at": backend})
        if s.predict_seconds > allowance:
            problems.append(
                f"class 2 (work in excluded time): evaluation {s.index} took {s.predict_seconds:.2f} s to predict "
                f"{items} items, more than twice the model's own batch-1 pass over them ({backend}, "
                f"allowance {allowance:.2f} s): the model works beyond its forward pass in evaluation time, which is not on the clock")
    return {"floor_seconds": PREDICT_FLOOR_S, "factor": PREDICT_FACTOR, "evaluations": checked}, problems
