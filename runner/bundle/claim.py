"""The claim a bundle signs: the predicate of its in-toto Statement, built from result.json.

It is derived, never typed: ``verify`` rebuilds it from the bundle's result.json and the
file digests and requires equality, so the signed claim and the published file agree.
"""

from __future__ import annotations

from typing import Any

from runner.bundle.filelist import PROFILE_FILE

PREDICATE_TYPE = "https://runner.dev/attestations/benchmark-result/v1"
PREDICATE_VERSION = 1

_INFERENCE_FIELDS = (
    "passed_gate", "gate_reason", "scores", "count", "warmup", "latency_ms",
    "throughput_per_s", "cost_per_10k_usd",
)


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def build_predicate(result: dict, digests: dict[str, str]) -> dict:
    """The claim: entry, task, threshold, TTA, cost, latency per backend, hardware, digests.

    ``digests`` is the bundle's ``{path: sha256}``; the fingerprint, profile and
    result.json digests are taken from it.
    """
    training = result.get("training") or {}
    crossing = training.get("crossing")
    evaluations = training.get("evaluations") or []
    crossing_scores = (
        evaluations[crossing].get("scores")
        if isinstance(crossing, int) and 0 <= crossing < len(evaluations) and isinstance(evaluations[crossing], dict)
        else None
    )
    entry = result.get("entry") or {}
    inference = result.get("inference") or {}
    return {
        "version": PREDICATE_VERSION,
        "result_schema_version": result.get("schema_version"),
        "run_ids": [result.get("run_id")],
        "toolkit": result.get("toolkit"),
        "entry": {k: entry.get(k) for k in ("name", "model", "source", "framework")},
        "task": result.get("task"),
        "seed": result.get("seed"),
        "smoke": result.get("smoke"),
        "status": result.get("status"),
        "incomplete_reason": result.get("incomplete_reason"),
        "conforming": result.get("conforming"),
        "nonconforming_reasons": result.get("nonconforming_reasons"),
        "training": {
            "reached": training.get("reached"),
            "tta_seconds": training.get("tta_seconds"),
            "tta_hours": training.get("tta_hours"),
            "launch_seconds": training.get("launch_seconds"),
            "excluded_eval_seconds": training.get("excluded_eval_seconds"),
            "wall_seconds": training.get("wall_seconds"),
            "crossing": crossing,
            "evaluations": len(evaluations),
            "scores_at_crossing": crossing_scores,
        },
        "cost": result.get("cost"),
        "inference": {
            backend: {k: claim.get(k) for k in _INFERENCE_FIELDS}
            for backend, claim in sorted(inference.items()) if isinstance(claim, dict)
        },
        "hardware": result.get("hardware"),
        "digests": {
            "result": digests.get("result.json"),
            "fingerprint": digests.get("fingerprint.json"),
            "hardware_profile": digests.get(PROFILE_FILE),
            "image": _get(result, "image", "id"),
            "base_image": _get(result, "image", "base_id"),
            "manifest": _get(entry, "digests", "manifest"),
            "dockerfile": _get(entry, "digests", "dockerfile"),
            "lock": _get(entry, "digests", "lock"),
            "data": _get(result, "data", "digest"),
            "harness": _get(result, "toolkit", "harness_sha256"),
        },
    }


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
