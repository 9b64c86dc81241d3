"""Checks that the scores are the auditor's: own data, complete predictions, same numbers."""

from __future__ import annotations

from runner.errors import UserError
from runner.score.evaluations import backend_predictions_name, score_predictions
from runner.verify.evidence import Evidence, Unavailable
from runner.verify.report import Verdict
from runner.verify.tolerance import SCORE, close


def check_data_digest(ev: Evidence) -> Verdict:
    claimed = ev.claim("data", "digest")
    claimed_task = ev.claim("data", "task")
    mine = ev.staged.digest
    where = "regenerated smoke data" if ev.smoke else f"staged {ev.task.id}"
    if claimed_task not in (None, ev.task.id):
        return Verdict(False, f"the data set is for task {claimed_task!r}, the result for {ev.task.id!r}")
    if claimed != mine:
        return Verdict(False, f"the run used data {claimed}, the auditor's {where} is {mine}")
    return Verdict(True, f"the run's data is the auditor's {where} ({mine[:23]})")


def _refused_by_runner(ev: Evidence, claimed: dict, scored) -> bool:
    """An evaluation the runner itself refused (a FIFO named as a checkpoint, a file over the
    quota, a builder past its time): its signed thaw event and the record give the same
    reason, nothing is scored and it meets nothing. Such an evaluation is an honest gap."""
    if not scored.problem or claimed.get("problem") != scored.problem:
        return False
    if claimed.get("scores") or claimed.get("meets") is not False:
        return False
    try:
        from_events = ev.scored_from_events
    except Unavailable:
        return False
    return scored.index < len(from_events) and from_events[scored.index].problem == scored.problem


def check_eval_set_complete(ev: Evidence) -> Verdict:
    n = ev.eval_size
    problems = []
    if ev.claim("task", "eval_size") != ev.task.eval_size:
        problems.append(f"result.json says the evaluation set has {ev.claim('task', 'eval_size')} items, the task {ev.task.eval_size}")
    for claimed, scored in zip(ev.claimed_evaluations, ev.rescored):
        if _refused_by_runner(ev, claimed, scored):
            continue
        if scored.count != n:
            problems.append(f"evaluation {scored.index}: {scored.problem or f'{scored.count} rows'} (need {n})")
        elif claimed.get("count") != n:
            problems.append(f"evaluation {scored.index}: result.json claims {claimed.get('count')} rows, the file has {n}")
    for backend, record in sorted(ev.claim_object("inference").items()):
        if not isinstance(record, dict) or not record.get("latency_ms"):
            continue  # a backend without a claim is not scored
        for name in (backend_predictions_name(ev.task), "latencies_ns.npy"):
            try:
                rows = len(ev.backend_array(backend, name))
            except Unavailable as err:
                problems.append(str(err))
                continue
            if rows != n:
                problems.append(f"inference/{backend}/{name} has {rows} rows (need {n})")
        if record.get("count") != n:
            problems.append(f"inference.{backend}.count is {record.get('count')} (need {n})")
    if problems:
        return Verdict(False, "; ".join(problems))
    return Verdict(True, f"{len(ev.rescored)} evaluation(s) and every timed backend cover all {n} items"
    )


def _scores_equal(claimed: object, recomputed: dict[str, float]) -> bool:
    if not isinstance(claimed, dict) or set(claimed) != set(recomputed):
        return False
    return all(close(claimed[k], v, abs_tol=SCORE) for k, v in recomputed.items())


def _fmt(scores: object) -> str:
    if not isinstance(scores, dict):
        return repr(scores)
    return ", ".join(f"{k} {v:.6f}" if isinstance(v, float) else f"{k} {v!r}" for k, v in sorted(scores.items()))


def check_scores(ev: Evidence) -> Verdict:
    """Every evaluation and every backend, scored again against the auditor's labels."""
    problems = []
    for claimed, scored in zip(ev.claimed_evaluations, ev.rescored):
        if _refused_by_runner(ev, claimed, scored):
            continue
        if scored.problem:
            problems.append(f"evaluation {scored.index}: {scored.problem}")
        elif not _scores_equal(claimed.get("scores"), scored.scores):
            problems.append(
                f"evaluation {scored.index}: claimed {_fmt(claimed.get('scores'))}, recomputed {_fmt(scored.scores)}"
            )
        elif claimed.get("meets") is not scored.meets:
            problems.append(f"evaluation {scored.index}: claims meets={claimed.get('meets')}, recomputed {scored.meets}")
    for backend, record in sorted(ev.claim_object("inference").items()):
        if not isinstance(record, dict) or record.get("scores") is None:
            continue
        try:
            preds = ev.backend_array(backend, backend_predictions_name(ev.task))
            _, scores, problem = score_predictions(ev.task, preds, ev.labels)
        except Unavailable as err:
            problems.append(str(err))
            continue
        except (UserError, ValueError, IndexError) as err:  # wrong shape, dtype or count
            problems.append(f"inference.{backend}: predictions cannot be scored ({err})")
            continue
        if problem:
            problems.append(f"inference.{backend}: {problem}")
        elif not _scores_equal(record["scores"], scores):
            problems.append(f"inference.{backend}: claimed {_fmt(record['scores'])}, recomputed {_fmt(scores)}")
    if problems:
        return Verdict(False, "; ".join(problems))
    metric = ev.task.metric
    best = max((s.scores.get(metric, 0.0) for s in ev.rescored), default=None)
    best_text = f"; best {metric} {best:.4f}" if best is not None else ""
    return Verdict(True,
        f"{len(ev.rescored)} evaluation(s) and {len(ev.claim_object('inference'))} backend(s) rescored equal{best_text}",
    )
