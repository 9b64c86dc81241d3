"""What ``runner verify`` re-checks of a run's cross-seed record (``training.cross_seed``).

A bundle holds one run, so the comparison with the other runs of its reproduction cannot be
redone from it; what can be is checked: every finding the record lists is among the run's
non-conforming reasons, ``checked`` follows from the runs and the seeds it names, and the
evaluator's copy of the crossing checkpoint (the tensors the comparison used) is the
checkpoint's bytes, recomputed from the bundle's own copy. A result from before the record
has none and is not judged by it.
"""

from __future__ import annotations

from runner.score.across_runs import not_checked
from runner.score.model_origin import CLASS4
from runner.score.weights_dump import read_checked


def cross_seed_problems(ev) -> list[str]:
    record = ev.claim("training", "cross_seed")
    if record is None:
        return []
    if not isinstance(record, dict) or not isinstance(record.get("pairs"), list):
        return ["training.cross_seed is malformed"]
    problems = []
    reasons = set(map(str, ev.claim("nonconforming_reasons") or []))
    earlier = record.get("earlier")
    compared = earlier.get("compared") if isinstance(earlier, dict) else []
    for pair in record["pairs"] + (compared if isinstance(compared, list) else []):
        for finding in (pair.get("findings") or []) if isinstance(pair, dict) else []:
            if CLASS4 + str(finding) not in reasons:
                problems.append(f"the cross-seed finding {str(finding)[:120]!r} is not among the non-conforming reasons")
    runs, drawn = record.get("runs"), record.get("seeds_drawn")
    if not isinstance(runs, int) or not isinstance(drawn, bool) or record.get("checked") is not (not_checked(runs, drawn) is None):
        problems.append(f"training.cross_seed says checked={record.get('checked')!r} for {runs!r} runs "
                        f"(seeds drawn by the runner: {drawn!r})")
    if record.get("weights_problem") is None and record.get("runs", 0) > 1:
        if problem := _own_weights_problem(ev):
            problems.append(f"the tensors compared across seeds are not the crossing checkpoint's: {problem}")
    return problems


def _own_weights_problem(ev) -> str | None:
    """The evaluator's copy of the crossing checkpoint, checked against the bundle's copy."""
    crossing = ev.claim("training", "crossing")
    sensitivity = ev.claim("training", "model_origin", "sensitivity") or []
    record = next((r.get("weights") for r in sensitivity if isinstance(r, dict) and r.get("of") == "crossing"), None)
    kept = sorted((ev.root / "checkpoints").glob(f"{crossing}.*")) if isinstance(crossing, int) else []
    if not kept:
        return None  # the checkpoint check says whether it should be there
    return read_checked(ev.root, record, kept[0])[1]
