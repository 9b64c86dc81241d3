"""``model-origin``: the class 4 checks of the scored models, recomputed from the bundle
(and class 5's check that each timed backend ran the final model the evaluator scored).

Provenance is re-read from the evaluator's records the bundle carries (the same reader
and rule as ``reproduce``); the sensitivity predictions are scored again against the
auditor's own labels; each builder time is read from the runner's own events and held
to the limit (never above the run contract's cap). A result that claims conforming
while any of these finds a class 4 problem fails.
"""

from __future__ import annotations

from runner.manifest.schema import ENTRY_SCHEMA
from runner.score.evaluations import backend_predictions_name, load_predictions, primary_score, score_file
from runner.score.model_origin import predict_time_problems, timed_disagreement, timed_model_problem
from runner.score.summary import model_origin
from runner.score.training_evidence import training_evidence
from runner.tasks.base import IMAGES
from runner.verify.evidence import Evidence
from runner.verify.report import Verdict
from runner.verify.tolerance import SCORE, close, shown

BUILDER_CAP_S = ENTRY_SCHEMA["properties"]["inference"]["properties"]["builder_seconds"]["maximum"]


def _timed_model_problems(ev: Evidence, final: dict) -> list[str]:
    """Each timed backend's answers against the evaluator's predictions of the final model."""
    try:
        evaluated = load_predictions(ev.root / final["predictions"])
    except (OSError, ValueError):
        return []
    found = []
    for backend, record in sorted(ev.claim_object("inference").items()):
        if not isinstance(record, dict) or not record.get("latency_ms"):
            continue
        try:
            timed = ev.backend_array(backend, backend_predictions_name(ev.task))
        except Exception:  # noqa: BLE001 - eval-set-complete names a missing file
            continue
        if problem := timed_model_problem(backend, timed_disagreement(timed, evaluated)):
            found.append(problem)
    return found


def _training_evidence(ev: Evidence, scored: list, crossing: int | None) -> tuple[list[str], list[str], str]:
    """Evidence of training (class 4f) recomputed from the runner's events and the training
    set's size: (mismatches with result.json, class 4 findings, a few words for the verdict).
    A result from before the check records none: "not recorded"."""
    claimed = ev.claim("training", "evidence")
    if claimed is None:
        return [], [], "evidence of training not recorded (the result predates it)"

    train_samples = ev.claim("training", "train_samples")  # not a count: not recorded
    mine, problem = training_evidence(scored, crossing, train_samples if isinstance(train_samples, int) else None,
                                      ev.eval_size,
                                      judged=ev.task.inputs == IMAGES, fraction=ev.rules.evidence_fraction)
    mismatches = []
    if not isinstance(claimed, dict) or mine is None:
        mismatches.append("training.evidence is recorded but nothing crossed, or it is malformed")
    else:
        for key in ("cpu_seconds", "forward_pass_cpu_seconds", "ratio", "floor_cpu_seconds"):
            if not close(claimed.get(key), mine[key], abs_tol=1e-6, rel_tol=1e-6):
                mismatches.append(f"training.evidence.{key}: claimed {shown(claimed.get(key))}, "
                                  f"recomputed {shown(mine[key])} from the events")
    words = (f"training {mine['cpu_seconds']:.2f} CPU-s to the crossing, {mine['ratio']:.2f}x one forward pass "
             f"over the training set" if mine and mine.get("ratio") is not None
             else f"evidence of training {(mine or {}).get('not_measured') or 'not recorded'}")
    return mismatches, [problem] if problem else [], words


def _timed_but_not_evaluated(ev: Evidence) -> bool:
    """A backend timed the final model, and the runner has no predictions of its own for it."""
    inference, final = ev.claim("inference"), ev.claim("training", "final_model")
    timed = isinstance(inference, dict) and any(isinstance(r, dict) and r.get("latency_ms") for r in inference.values())
    return timed and not (isinstance(final, dict) and isinstance(final.get("predictions"), str))


def check_model_origin(ev: Evidence) -> Verdict:
    if _timed_but_not_evaluated(ev) and ev.claim("conforming"):
        return Verdict(False, "claims conforming, but class 5: its backends timed a final model "
                              "the runner never evaluated")
    claimed = ev.claim("training", "model_origin")
    if claimed is None:
        if ev.claim("training", "reached"):
            return Verdict(True, "no model-origin record: the result predates these checks (toolkit "
                                 f"{ev.claim('toolkit', 'version')}); provenance and sensitivity are not known")
        return Verdict(True, "nothing crossed the threshold: no scored model to check")
    if not isinstance(claimed, dict):
        return Verdict(False, "training.model_origin is malformed")
    limit = (claimed.get("builder_seconds") or {}).get("limit")
    if not isinstance(limit, (int, float)) or isinstance(limit, bool) or not 0 < limit <= BUILDER_CAP_S:
        return Verdict(False, f"the builder's time limit {shown(limit)} is not within the run contract's cap {BUILDER_CAP_S} s")
    problems = []
    scored = ev.scored_from_events
    for s in scored:
        if s.builder_seconds is not None and s.builder_seconds > limit:
            problems.append(f"evaluation {s.index}: the builder took {s.builder_seconds:.3f} s (limit {limit:g} s)")
    crossing = ev.claim("training", "crossing")
    crossing = crossing if isinstance(crossing, int) and 0 <= crossing < len(scored) else None
    final = ev.claim("training", "final_model")
    if isinstance(final, dict) and isinstance(final.get("predictions"), str):
        _, scores, _ = score_file(ev.task, ev.root, final["predictions"], ev.labels)
        final = {**final, "scores": scores}
    else:
        final = None
    sensitivity = [r for r in (claimed.get("sensitivity") or []) if isinstance(r, dict)]
    recomputed, found = model_origin(ev.task, scored, crossing, final, sensitivity, ev.root, ev.labels, limit)
    for mine, theirs in zip((recomputed or {}).get("sensitivity", []), sensitivity):
        if mine.get("score") is not None and not close(theirs.get("score"), mine["score"], abs_tol=SCORE):
            problems.append(f"sensitivity of the {mine.get('of')} model: claimed {shown(theirs.get('score'))}, "
                            f"recomputed {shown(mine['score'])}")
    expected = {"crossing"} if crossing is not None else set()
    if final is not None:
        expected.add("final")
    missing = expected - {r.get("of") for r in sensitivity}
    if missing:
        problems.append(f"no sensitivity record for the {', '.join(sorted(missing))} model")
    if final is not None:
        found += _timed_model_problems(ev, final)

    inference = ev.claim("inference")
    if isinstance(inference, dict):
        found += predict_time_problems(scored, crossing, inference, ev.eval_size)[1]
    mismatches, unevidenced, evidence_words = _training_evidence(ev, scored, crossing)
    problems += mismatches
    found += unevidenced
    if found and ev.claim("conforming"):
        problems.append("claims conforming, but " + "; ".join(found))
    from runner.verify.cross_seed import cross_seed_problems  # lazy: start-up (runner --help)

    problems += cross_seed_problems(ev)
    if problems:
        return Verdict(False, "; ".join(problems))
    parts = [f"{r.get('of')} {primary_score(ev.task, {ev.task.metric: r['score']}) if r.get('score') is not None else None}"
             for r in (recomputed or {}).get("sensitivity", [])]
    foreign = sum(p.get("foreign_count", 0) for p in ((recomputed or {}).get("provenance") or {}).values())
    return Verdict(True, f"provenance: {foreign} foreign tensor(s); permuted-checkpoint scores "
                         f"{', '.join(str(p) for p in parts) or 'none'}; builder at most "
                         f"{shown((recomputed or {}).get('builder_seconds', {}).get('max'))} s of {limit:g} s"
                         f"; {evidence_words}" + ("; marked non-conforming for it" if found else ""))
