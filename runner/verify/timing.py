"""Checks of the clock: the events form a valid run, TTA follows from them, the crossing is first."""

from __future__ import annotations

from runner import safe_read
from runner.digests import sha256_file
from runner.score.curve import curve_rows
from runner.score.probe import probe_problem
from runner.score.tta import time_to_accuracy
from runner.verify.evidence import Evidence, Unavailable
from runner.verify.report import Verdict
from runner.verify.tolerance import TTA_SECONDS, close, shown


def check_events_order(ev: Evidence) -> Verdict:
    """Arrival order and host times increase, evaluations pair up, and match result.json."""
    try:
        line = ev.timeline
    except Unavailable as err:
        return Verdict(False, str(err))
    if line.run_stop is None:
        return Verdict(False, "the events have no container exit")
    claimed = ev.claimed_evaluations
    if len(claimed) != len(line.evaluations):
        return Verdict(False,
            f"the events hold {len(line.evaluations)} evaluations, result.json {len(claimed)}",
        )
    for e, c in zip(line.evaluations, claimed):
        same = (
            c.get("predictions") == e.predictions
            and c.get("epoch") == e.epoch
            and c.get("checkpoint_sha256") == e.checkpoint_sha256
            and c.get("excluded", True) == e.excluded
            and close(c.get("gpu_tail_seconds", 0.0), e.gpu_tail_seconds, abs_tol=TTA_SECONDS)
            and close(c.get("start"), e.start, abs_tol=TTA_SECONDS)
            and close(c.get("stop"), e.stop, abs_tol=TTA_SECONDS)
        )
        if not same:
            return Verdict(False,
                f"evaluation {e.index} in the events (epoch {e.epoch}, {e.start:.6f}-{e.stop:.6f} s, "
                f"{e.predictions}) differs from result.json's",
            )
    return Verdict(True, f"{len(ev.events)} events in order; {len(line.evaluations)} evaluations paired"
    )


def check_tta(ev: Evidence) -> Verdict:
    """TTA, its exclusions and the curve's hours, recomputed from the events and rescored predictions."""
    try:
        line = ev.timeline
    except Unavailable as err:
        return Verdict(False, f"cannot recompute TTA: {err}")
    scored = ev.scored_from_events
    tta = time_to_accuracy(line, [s.meets for s in scored])
    training = ev.claim_object("training")
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
        # results from before the resolution was recorded do not have it: judged only where stated
        if "tta_resolution_seconds" in training and not close(
                training["tta_resolution_seconds"], tta.resolution_seconds, abs_tol=2 * TTA_SECONDS):
            problems.append(f"tta_resolution_seconds claimed {shown(training['tta_resolution_seconds'])}, "
                            f"recomputed {shown(tta.resolution_seconds)}")
    if not close(training.get("launch_seconds"), line.clock_start, abs_tol=TTA_SECONDS):
        problems.append(
            f"launch_seconds claimed {shown(training.get('launch_seconds'))}, the events say {shown(line.clock_start)}"
        )
    curve = ev.root / "curve.tsv"
    if curve.exists():
        lines = safe_read.read_text(curve, "text").splitlines()  # Unreadable: the check fails, naming it
        if [r.split("\t") for r in lines[1:]] != curve_rows(ev.task, line, scored):
            problems.append("curve.tsv differs from the curve recomputed from the events and scores")
    else:
        problems.append("the bundle has no curve.tsv")
    if problems:
        return Verdict(False, "; ".join(problems))
    if not tta.reached:
        return Verdict(True, "threshold never reached, as claimed")
    return Verdict(True,
        f"TTA {tta.seconds:.3f} s recomputed (resolution {tta.resolution_seconds:.3f} s; "
        f"evaluations excluded: {tta.excluded_eval_seconds:.3f} s)",
    )


def check_first_crossing(ev: Evidence) -> Verdict:
    """The claimed crossing meets the task's threshold and no earlier evaluation does."""
    task = ev.task
    claimed_task = ev.claim_object("task")
    if claimed_task.get("threshold") != task.threshold or claimed_task.get("metric") != task.metric:
        return Verdict(False,
            f"result.json claims {claimed_task.get('metric')} >= {claimed_task.get('threshold')}, "
            f"{ev.rules.label} require {task.metric} >= {task.threshold}",
        )
    scored = ev.rescored
    first = next((s.index for s in scored if s.meets), None)
    crossing = ev.claim("training", "crossing")
    if crossing != first:
        where = "never" if first is None else f"first at evaluation {first}"
        scores = ", ".join(f"{s.index}: {s.scores.get(task.metric, float('nan')):.4f}" for s in scored)
        return Verdict(False,
            f"claims the crossing at evaluation {crossing}; {task.metric} >= {task.threshold} is met {where} ({scores})",
        )
    if first is None:
        return Verdict(True, f"no evaluation meets {task.metric} >= {task.threshold}, as claimed")
    value = scored[first].scores[task.metric]
    return Verdict(True,
        f"evaluation {first} is the first to meet {task.metric} >= {task.threshold} ({value:.4f})",
    )


def check_checkpoints(ev: Evidence) -> Verdict:
    """The crossing checkpoint in the bundle is the one the runner evaluated, and every
    evaluation record names the checkpoint digest the runner's events recorded."""
    line = ev.timeline
    missing = [e.index for e in line.evaluations if e.checkpoint_sha256 is None and e.predictions]
    scored = ev.scored_from_events
    problems = []
    crossing = ev.claim("training", "crossing")
    if isinstance(crossing, int) and 0 <= crossing < len(line.evaluations):
        record = line.evaluations[crossing]
        kept = sorted((ev.root / "checkpoints").glob(f"{crossing}.*")) + sorted((ev.root / "checkpoints").glob(f"{crossing}"))
        if kept:
            digest = sha256_file(kept[0])
            if digest != record.checkpoint_sha256:
                problems.append(
                    f"checkpoints/{kept[0].name} has sha256 {digest[:16]}, the runner evaluated {str(record.checkpoint_sha256)[:16]}"
                )
        elif ev.claim("training", "reached"):
            problems.append(f"the crossing checkpoint (evaluation {crossing}) is not in the bundle")
    final = ev.claim("training", "final_model")
    if isinstance(final, dict) and final.get("sha256"):
        weights = ev.root / "output" / str(final.get("weights", ""))
        if weights.is_file() and sha256_file(weights) != final["sha256"]:
            problems.append("the final model in output/ is not the one the runner evaluated")
    for s in scored:
        if s.problem is None and s.index in missing:
            problems.append(f"evaluation {s.index} was scored but names no checkpoint digest")
    if problems:
        return Verdict(False, "; ".join(problems))
    return Verdict(True,
        f"{len(line.evaluations)} evaluation(s) name their checkpoint digests; the crossing checkpoint matches",
    )


def _probe_too_small(crossing, seed: object, least: int) -> str | None:
    """Why the crossing's probe does not count: none at all, fewer items than the runner
    probes (``least``: the rules'), or items drawn by another seed than the run's."""
    if crossing.probe_predictions is None or crossing.probe_gap is None:
        return "has no score: a crossing is probed"
    if crossing.probe_items is not None:
        if crossing.probe_items < min(least, crossing.count or least):
            return f"predicted {crossing.probe_items} items, fewer than the runner's {least}"
        if crossing.probe_seed != seed:
            return f"items were drawn by seed {crossing.probe_seed}, not the run's {seed}"
    return None


def check_probe(ev: Evidence) -> Verdict:
    """The generalization probe's scores, recomputed; a crossing far worse on the probe
    must be marked non-conforming."""
    scored = ev.scored_from_events
    claimed = ev.claimed_evaluations
    for s, c in zip(scored, claimed):
        if not close(c.get("probe_gap"), s.probe_gap, abs_tol=1e-6):
            return Verdict(False,
                f"evaluation {s.index}: probe gap claimed {shown(c.get('probe_gap'))}, recomputed {shown(s.probe_gap)}",
            )
    crossing = ev.claim("training", "crossing")
    if isinstance(crossing, int) and 0 <= crossing < len(scored):
        problem = probe_problem(scored[crossing].probe_gap, ev.task)
        if problem and ev.claim("conforming"):
            return Verdict(False, f"claims conforming, but {problem}")
        if ev.claim("probe") and ev.claim("conforming") and (
                short := _probe_too_small(scored[crossing], ev.claim("seed"), ev.rules.probe_items)):
            return Verdict(False, f"claims conforming, but the crossing's probe {short}")
    gaps = [s.probe_gap for s in scored if s.probe_gap is not None]
    return Verdict(True, f"probe gaps recomputed ({', '.join(f'{g * 100:.2f}' for g in gaps) or 'none'} points)")
