"""The claim a bundle signs: the predicate of its in-toto Statement, built from result.json.

It is derived, never typed: ``verify`` rebuilds it from the bundle's result.json and the
file digests and requires equality, so the signed claim and the published file agree.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from runner.bundle.filelist import PROFILE_FILE
from runner.results.inference import as_dicts
from runner.results.record import RESULT_FILE, Result, Training

PREDICATE_TYPE = "https://runner.dev/attestations/benchmark-result/v1"
PREDICATE_VERSION = 1

_INFERENCE_FIELDS = (
    "passed_gate", "gate_reason", "scores", "count", "warmup", "latency_ms",
    "throughput_per_s", "cost_per_10k_usd",
)


def build_predicate(result: Result, digests: dict[str, str]) -> dict:
    """The claim: entry, task, threshold, TTA, cost, latency per backend, hardware, digests.

    ``digests`` is the bundle's ``{path: sha256}``; the fingerprint, profile and
    result.json digests are taken from it.
    """
    toolkit, image, data, cost = result.toolkit, result.image, result.data, result.cost
    if toolkit is None or image is None or data is None or cost is None:  # only a placeholder lacks them
        raise ValueError(f"run {result.run_id} never started: no toolkit, image, data or cost to claim")
    training = result.training or Training(wall_seconds=0.0)
    crossing = training.crossing
    evaluations = training.evaluations
    crossing_scores = (
        evaluations[crossing].get("scores")
        if isinstance(crossing, int) and 0 <= crossing < len(evaluations) and isinstance(evaluations[crossing], dict)
        else None
    )
    entry = result.entry
    claim = {
        "version": PREDICATE_VERSION,
        "result_schema_version": result.schema_version,
        "run_ids": [result.run_id],
        "toolkit": asdict(toolkit),
        "entry": {"name": entry.name, "model": entry.model, "source": entry.source, "framework": entry.framework},
        "task": asdict(result.task),
        "seed": result.seed,
        "smoke": result.smoke,
        "status": result.status,
        "incomplete_reason": result.incomplete_reason,
        "conforming": result.conforming,
        "nonconforming_reasons": result.nonconforming_reasons,
        "training": {
            "reached": training.reached if result.training else None,
            "tta_seconds": training.tta_seconds,
            "tta_hours": training.tta_hours,
            "launch_seconds": training.launch_seconds,
            "excluded_eval_seconds": training.excluded_eval_seconds,
            "wall_seconds": training.wall_seconds if result.training else None,
            "crossing": crossing,
            "evaluations": len(evaluations),
            "scores_at_crossing": crossing_scores,
        },
        "cost": asdict(cost),
        "inference": {
            backend: {k: claim.get(k) for k in _INFERENCE_FIELDS}
            # as result.json has it: a field a record lacks is claimed as null, not as its default
            for backend, claim in sorted(as_dicts(result.inference).items())
        },
        "hardware": result.hardware,
        "digests": {
            "result": digests.get(RESULT_FILE),
            "fingerprint": digests.get("fingerprint.json"),
            "hardware_profile": digests.get(PROFILE_FILE),
            "image": image.id,
            "base_image": image.base_id,
            "manifest": entry.digests.get("manifest"),
            "dockerfile": entry.digests.get("dockerfile"),
            "lock": entry.digests.get("lock"),
            "data": data.digest,
            "harness": toolkit.harness_sha256,
        },
    }
    if result.ledger is not None:  # the key's ledger: its index and head, and the runs of the entry it had made
        claim["ledger"] = result.ledger
    return claim


def differences(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Dotted paths where two JSON values differ (for a readable verdict)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        out: list[str] = []
        for key in sorted(set(expected) | set(actual), key=str):
            sub = f"{path}.{key}" if path else str(key)
            if key not in expected or key not in actual:
                out.append(sub)
            else:
                out.extend(differences(expected[key], actual[key], sub))
        return out
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        out = []
        for i, (a, b) in enumerate(zip(expected, actual)):
            out.extend(differences(a, b, f"{path}[{i}]"))
        return out
    return [] if expected == actual and type(expected) is type(actual) else [path or "(top level)"]
