"""A claim's evidence: the signed bundles it names (``claimed.bundles``), each verified and
held to the claim (``runner.claims`` says what a claim is and which one applies).

It lives with ``runner verify``, above the claim itself: the manifest checks a claim's
profile when it loads an entry, and verifying bundles needs the whole of ``verify``.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from runner import safe_read
from runner.bundle.open import open_bundle
from runner.claims import (
    REQUIRED_RUNS, applicable_claim, claim_profile_id, claims_of, cross_seed_problem, variant_problem,
)
from runner.keys.trust import trusted_keys
from runner.profiles import load_profile, match
from runner.verify.checks import verify_bundle
from runner.verify.evidence import Auditor


def check_evidence(entry, root: Path, keys: str | Path | None, claimed: dict | None = None) -> list[str]:
    """Every problem with a claim's archived bundles (``claimed``: one of ``claims_of``; by
    default the main one); [] when they bear it out. ``keys``: ``--trusted-keys`` (None: the
    keys every command trusts, ``runner.keys.trust``)."""
    if claimed is None:
        claimed = (claims_of(entry.claimed, entry.hardware_profile) or [{}])[0]
    bundles = claimed.get("bundles") or []
    if not bundles:
        return ["the claim names no bundles (claimed.bundles)"]
    profile_id = claimed.get("profile") or claim_profile_id(entry)
    profile = load_profile(profile_id)
    auditor = Auditor(trusted_keys=trusted_keys(keys))
    problems, ttas, seeds = [], [], set()
    if len(bundles) < REQUIRED_RUNS:
        problems.append(f"the claim has {len(bundles)} bundles: a claim needs {REQUIRED_RUNS} runs with different "
                        "seeds, compared across seeds (runner reproduce --runs 3)")
    for name in bundles:
        path = root / name
        if not path.is_file():
            problems.append(f"{name}: no such bundle")
            continue
        report = verify_bundle(path, auditor)
        if not report.ok:
            problems.append(f"{name}: does not verify ({', '.join(report.failed)})")
            continue
        with open_bundle(path) as opened:
            result = safe_read.read_json_object(opened.root / "result.json", "result")
            fingerprint = safe_read.read_json_object(opened.root / "fingerprint.json", "json")
        if (result.get("entry") or {}).get("name") != entry.name:
            problems.append(f"{name}: a run of {(result.get('entry') or {}).get('name')!r}, not {entry.name}")
        if not result.get("conforming") or result.get("smoke") or result.get("status") != "complete":
            problems.append(f"{name}: not a complete, conforming run")
        if variant := variant_problem(result.get("variant")):
            problems.append(f"{name}: {variant}")
        applies = applicable_claim(entry.claimed, entry.hardware_profile, fingerprint)
        if not (applies.comparable and applies.profile == profile_id):
            if mismatches := [str(m) for m in match(profile, fingerprint)]:
                problems.append(f"{name}: its host does not meet {profile_id}: {'; '.join(mismatches)}")
            else:
                problems.append(f"{name}: its host is compared with the claim on {applies.profile}, not {profile_id}")
        training = result.get("training") or {}
        if problem := cross_seed_problem(training.get("cross_seed")):
            problems.append(f"{name}: {problem}")
        seeds.add(result.get("seed"))
        if training.get("reached") and isinstance(training.get("tta_seconds"), (int, float)):
            ttas.append(training["tta_seconds"])
        else:
            problems.append(f"{name}: did not reach the threshold")
    if len(seeds) < len(bundles):
        problems.append("the claim's bundles do not all have different seeds")
    if ttas and len(ttas) == len(bundles):
        median = statistics.median(ttas)
        if round(median, 2) != round(float(claimed.get("tta_seconds", -1)), 2):
            problems.append(f"the bundles' median TTA is {median:.2f} s, the claim {claimed.get('tta_seconds')} s")
        cv = statistics.stdev(ttas) / statistics.mean(ttas) if len(ttas) > 1 else 0.0
        if "cv" in claimed and round(cv, 3) != round(float(claimed["cv"]), 3):
            problems.append(f"the bundles' coefficient of variation is {cv:.3f}, the claim {claimed['cv']}")
    return problems
