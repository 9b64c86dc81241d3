"""From one backend's harness files to its claim: gate, wall-window check, latency, cost.

A backend earns a latency claim only when (1) it predicted every evaluation item, (2)
those predictions meet the task's threshold on labels only the host holds, and (3) its
per-item latencies fit inside the window the host stamped on its own clock.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from runner.errors import RunnerError
from runner.inference.loadgen import loadgen_record
from runner.score.evaluations import load_predictions
from runner.tasks import Task

if TYPE_CHECKING:
    from runner.data.store import EvalLabels

# The host stamps infer_start/infer_stop as their lines arrive; the lines travel through
# the engine's output stream, whose delay can differ a little between the two.
TRANSPORT_SLACK_S = 0.1
ITEMS_FOR_COST = 10_000


def latency_stats_ms(latencies_ns: np.ndarray) -> dict[str, float]:
    """Mean (DAWNBench's figure), p50, p90, p99 and max, in milliseconds."""
    ms = np.asarray(latencies_ns, dtype=np.float64) / 1e6
    p50, p90, p99 = np.percentile(ms, [50, 90, 99])
    return {
        "mean": round(float(ms.mean()), 6),
        "p50": round(float(p50), 6),
        "p90": round(float(p90), 6),
        "p99": round(float(p99), 6),
        "max": round(float(ms.max()), 6),
    }


def cost_per_10k_usd(mean_latency_s: float, usd_per_hour: float) -> float:
    """DAWNBench's inference cost: 10,000 items at the mean batch-1 latency."""
    return mean_latency_s * ITEMS_FOR_COST / 3600 * usd_per_hour


def _load_array(path: Path) -> np.ndarray | None:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError):
        return None


def _load_answers(path: Path) -> dict | None:
    """A question task's ``{id: answer}``, read within limits; None when unreadable."""
    try:
        answers = load_predictions(path)
    except (OSError, ValueError):
        return None
    if not isinstance(answers, dict) or not all(isinstance(v, str) for v in answers.values()):
        return None
    return answers


def _failed(reason: str, **fields) -> dict:
    out = {
        "passed_gate": False, "gate_reason": reason, "error": None, "scores": None,
        "count": None, "warmup": None, "latency_ms": None, "throughput_per_s": None,
        "cost_per_10k_usd": None, "window_seconds": None, "timed_seconds": None, "info": None,
        "loadgen": None,
    }
    out.update(fields)
    return out


class _Refused(RunnerError):
    """A gate the backend failed: why, and the record's fields that only this failure knows.
    Never leaves ``evaluate_backend``, which turns it into the failed record."""

    def __init__(self, reason: str, **fields: object):
        super().__init__(reason)
        self.reason = reason
        self.fields = fields


def _harness_info(backend: str, backend_dir: Path) -> dict:
    """The harness's ``info.json`` for the backend; refused when missing or saying it failed."""
    try:
        info = json.loads((backend_dir / "info.json").read_text())
    except (OSError, ValueError):
        raise _Refused(f"the harness wrote no results for {backend}", error="no info.json") from None
    if info.get("error"):
        raise _Refused(f"{backend} failed in the harness: {info['error']}", error=info["error"], info=info)
    return info


def _timed_outputs(backend: str, backend_dir: Path, task: Task, n: int) -> tuple[np.ndarray | dict, np.ndarray]:
    """The backend's predictions of the ``n`` items and its per-item latencies (integer ns)."""
    predictions: np.ndarray | dict | None
    if getattr(task, "inputs", "images") == "questions":
        predictions = _load_answers(backend_dir / "predictions.json")
    else:
        predictions = _load_array(backend_dir / "predictions.npy")
    latencies = _load_array(backend_dir / "latencies_ns.npy")
    if predictions is None or latencies is None:
        raise _Refused(f"{backend}: its predictions or latencies_ns.npy are missing or unreadable")
    if len(predictions) != n:
        raise _Refused(f"{backend} predicted {len(predictions)} items; the evaluation set has {n}",
                       count=int(len(predictions)))
    if latencies.shape != (n,) or not np.issubdtype(latencies.dtype, np.integer):
        raise _Refused(f"{backend} timed {latencies.shape} items (dtype {latencies.dtype}); expected int64 ({n},)",
                       count=n)
    return predictions, latencies


def _scores(backend: str, task: Task, predictions: np.ndarray | dict, labels: EvalLabels) -> dict:
    """The task's scores of the predictions against the host's labels."""
    try:
        if isinstance(predictions, dict):
            if set(predictions) != set(labels):
                raise ValueError("the answered question ids are not the evaluation set's")
        return task.score(predictions, labels)
    except Exception as exc:  # wrong shape for a top-5 task, and the like
        raise _Refused(f"{backend} predictions cannot be scored: {exc}", count=len(predictions)) from None


def _check_claim(backend: str, task: Task, score: float, latencies: np.ndarray, window_seconds: float | None,
                 timed_seconds: float) -> None:
    """Refused unless the score meets the threshold and the latencies are positive and fit
    inside the window the host stamped."""
    if not task.meets(score):
        raise _Refused(f"{backend} {task.metric} {score:.4f} misses the threshold {task.threshold}")
    if (latencies <= 0).any():
        raise _Refused(f"{backend} reported non-positive latencies")
    if window_seconds is None:
        raise _Refused(f"no host-stamped infer_start/infer_stop window for {backend}")
    if timed_seconds > window_seconds + TRANSPORT_SLACK_S:
        raise _Refused(
            f"{backend} per-item latencies sum to {timed_seconds:.3f} s, more than the "
            f"{window_seconds:.3f} s the host saw between infer_start and infer_stop"
        )


def evaluate_backend(
    backend: str,
    backend_dir: Path,
    task: Task,
    labels: EvalLabels,
    window_seconds: float | None,
    usd_per_hour: float,
    *,
    expected_count: int | None = None,
    loadgen_windows: dict[str, float | None] | None = None,
) -> dict:
    """The ``result.json`` ``inference.<backend>`` record for one backend's harness files.

    ``expected_count`` defaults to the task's evaluation-set size; only a smoke run's
    synthetic set (never a conforming result) may differ. A backend that earns a claim
    also carries LoadGen's figures (``loadgen``) when the harness ran LoadGen; the
    DAWNBench figure (``latency_ms``, every item once) stays the claim. Each gate it fails
    gives a record with what was known by then.
    """
    known: dict = {}  # the fields learnt so far, in the record's order
    try:
        info = _harness_info(backend, backend_dir)
        known.update(info=info, window_seconds=window_seconds, warmup=(info.get("warmup") or {}).get("count"))
        n = task.eval_size if expected_count is None else expected_count
        predictions, latencies = _timed_outputs(backend, backend_dir, task, n)
        scores = _scores(backend, task, predictions, labels)
        timed_seconds = float(latencies.sum()) / 1e9
        known.update(scores=scores, count=n, timed_seconds=round(timed_seconds, 6))
        _check_claim(backend, task, scores[task.metric], latencies, window_seconds, timed_seconds)
    except _Refused as refused:
        return _failed(refused.reason, **(known | refused.fields))
    stats = latency_stats_ms(latencies)
    mean_s = stats["mean"] / 1e3
    return {
        "passed_gate": True,
        "gate_reason": None,
        "error": None,
        **known,
        "latency_ms": stats,
        "throughput_per_s": round(1.0 / mean_s, 3),
        "cost_per_10k_usd": cost_per_10k_usd(mean_s, usd_per_hour),
        "loadgen": loadgen_record(backend_dir, info, loadgen_windows or {}, TRANSPORT_SLACK_S),
    }
