"""Check that every latency claim earned its gate, recomputed with the host's own measure."""

from __future__ import annotations

from runner.inference.measure import evaluate_backend
from runner.inference.phase import Windows
from runner.verify.evidence import Evidence
from runner.verify.report import Verdict
from runner.verify.tolerance import RELATIVE, close

# cost_per_10k_usd depends on the price: the cost check owns it.
_COMPARED = (
    "passed_gate", "scores", "count", "warmup", "latency_ms", "throughput_per_s",
    "window_seconds", "timed_seconds", "loadgen",
)


def _same(a: object, b: object) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return close(a, float(b), abs_tol=1e-9, rel_tol=RELATIVE)
    return a == b


def check_inference_gate(ev: Evidence) -> Verdict:
    claims = ev.claim_object("inference")
    timed = {b: r for b, r in sorted(claims.items()) if isinstance(r, dict) and r.get("latency_ms") is not None}
    if not timed:
        return Verdict(True, "no latency is claimed")
    usd_per_hour = ev.claim("cost", "usd_per_hour") or 0.0
    if not isinstance(usd_per_hour, (int, float)):
        return Verdict(False, f"result.json's cost.usd_per_hour is not a number: {str(usd_per_hour)[:80]}")
    windows = Windows.from_events(ev.inference_events)
    problems = []
    for backend, claim in timed.items():
        if claim.get("passed_gate") is not True:
            problems.append(f"{backend}: a latency is claimed but the backend did not pass the gate")
            continue
        record = evaluate_backend(
            backend, ev.root / "inference" / backend, ev.task, ev.labels,
            windows.window(backend), float(usd_per_hour),
            # a smoke run's synthetic set is smaller than the task's; reproduce scores it at its size
            expected_count=ev.eval_size if ev.smoke else None,
            loadgen_windows=windows.loadgen_windows(backend),
        )
        if not record["passed_gate"]:
            problems.append(f"{backend}: fails the gate when recomputed: {record['gate_reason']}")
            continue
        diffs = [f for f in _COMPARED if not _same(claim.get(f), record.get(f))]
        if diffs:
            detail = ", ".join(f"{f} claimed {claim.get(f)!r}, recomputed {record.get(f)!r}" for f in diffs)
            problems.append(f"{backend}: {detail}")
    if problems:
        return Verdict(False, "; ".join(problems))
    summary = ", ".join(f"{b} mean {r['latency_ms']['mean']:.3f} ms" for b, r in timed.items())
    return Verdict(True, f"gate passed and latencies recomputed: {summary}")
