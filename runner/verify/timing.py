"""Checks of the clock: the events form a valid run, TTA follows from them, the crossing is first."""

from __future__ import annotations

from runner.score.curve import curve_rows
from runner.score.tta import time_to_accuracy
from runner.verify.evidence import Evidence, Unavailable
from runner.verify.report import CheckResult
from runner.verify.tolerance import TTA_SECONDS, close, shown


def check_events_order(ev: Evidence) -> CheckResult:
    """Arrival order and host times increase, evaluations pair up, and match result.json."""
    try:
        line = ev.timeline
    except Unavailable as err:
        return CheckResult("events-order", False, str(err))
    if line.run_stop is None:
        return CheckResult("events-order", False, "the events have no run_stop")
    claimed = ev.claimed_evaluations
    if len(claimed) != len(line.evaluations):
        return CheckResult(
            "events-order", False,
            f"the events hold {len(line.evaluations)} evaluations, result.json {len(claimed)}",
        )
    for e, c in zip(line.evaluations, claimed):
        same = (
            c.get("predictions") == e.predictions
            and c.get("epoch") == e.epoch
            and close(c.get("start"), e.start, abs_tol=TTA_SECONDS)
            and close(c.get("stop"), e.stop, abs_tol=TTA_SECONDS)
        )
        if not same:
            return CheckResult(
                "events-order", False,
                f"evaluation {e.index} in the events (epoch {e.epoch}, {e.start:.6f}-{e.stop:.6f} s, "
                f"{e.predictions}) differs from result.json's",
            )
    return CheckResult(
        "events-order", True, f"{len(ev.events)} events in order; {len(line.evaluations)} evaluations paired"
    )


def check_tta(ev: Evidence) -> CheckResult:
    """TTA, its exclusions and the curve's hours, recomputed from the events and rescored predictions."""
    try:
        line = ev.timeline
    except Unavailable as err:
        return CheckResult("tta", False, f"cannot recompute TTA: {err}")
    scored = ev.scored_from_events
    tta = time_to_accuracy(line, [s.meets for s in scored])
    training = ev.claim("training") or {}
    claimed_reached = bool(training.get("reached"))
    problems = []
    if claimed_reached != tta.reached:
        problems.append(f"claims reached={claimed_reached}, recomputed {tta.reached}")
    if claimed_reached or tta.reached:
        hours = tta.seconds / 3600 if tta.seconds is not None else None
        for field, value, tol in (
            ("tta_seconds", tta.seconds, TTA_SECONDS),
            ("tta_hours", hours, TTA_SECONDS / 3600),
            ("excluded_eval_seconds", tta.excluded_eval_seconds, TTA_SECONDS),
        ):
            if not close(training.get(field), value, abs_tol=tol):
                problems.append(f"{field} claimed {shown(training.get(field))}, recomputed {shown(value)}")
    if not close(training.get("startup_seconds"), line.run_start, abs_tol=TTA_SECONDS):
        problems.append(
            f"startup_seconds claimed {shown(training.get('startup_seconds'))}, the events say {shown(line.run_start)}"
        )
    curve = ev.root / "curve.tsv"
    if curve.exists():
        lines = curve.read_text().splitlines()
        if [r.split("\t") for r in lines[1:]] != curve_rows(ev.task, line, scored):
            problems.append("curve.tsv differs from the curve recomputed from the events and scores")
    else:
        problems.append("the bundle has no curve.tsv")
    if problems:
        return CheckResult("tta", False, "; ".join(problems))
    if not tta.reached:
        return CheckResult("tta", True, "threshold never reached, as claimed")
    return CheckResult(
        "tta", True,
        f"TTA {tta.seconds:.3f} s recomputed (evaluations excluded: {tta.excluded_eval_seconds:.3f} s)",
    )


def check_first_crossing(ev: Evidence) -> CheckResult:
    """The claimed crossing meets the task's threshold and no earlier evaluation does."""
    task = ev.task
    claimed_task = ev.claim("task") or {}
    if claimed_task.get("threshold") != task.threshold or claimed_task.get("metric") != task.metric:
        return CheckResult(
            "first-crossing", False,
            f"result.json claims {claimed_task.get('metric')} >= {claimed_task.get('threshold')}, "
            f"the task {task.id} requires {task.metric} >= {task.threshold}",
        )
    scored = ev.rescored
    first = next((s.index for s in scored if s.meets), None)
    crossing = ev.claim("training", "crossing")
    if crossing != first:
        where = "never" if first is None else f"first at evaluation {first}"
        scores = ", ".join(f"{s.index}: {s.scores.get(task.metric, float('nan')):.4f}" for s in scored)
        return CheckResult(
            "first-crossing", False,
            f"claims the crossing at evaluation {crossing}; {task.metric} >= {task.threshold} is met {where} ({scores})",
        )
    if first is None:
        return CheckResult("first-crossing", True, f"no evaluation meets {task.metric} >= {task.threshold}, as claimed")
    value = scored[first].scores[task.metric]
    return CheckResult(
        "first-crossing", True,
        f"evaluation {first} is the first to meet {task.metric} >= {task.threshold} ({value:.4f})",
    )
