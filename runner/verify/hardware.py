"""Checks of where and at what price: the fingerprint meets the profile, the dollars follow."""

from __future__ import annotations

from runner.bundle import PROFILE_FILE
from runner.bundle.claim import differences
from runner.inference.measure import cost_per_10k_usd
from runner.profiles import cost_usd, match_nodes, price_fields
from runner.score.tta import time_to_accuracy
from runner.verify.evidence import Evidence
from runner.verify.report import Verdict
from runner.verify.tolerance import RELATIVE, close, shown


def _rules(data: dict) -> dict:
    """A profile's matching rules and limits: everything but its words, its price and its
    peak (reference figures for studies, which may be added or sourced better later)."""
    return {k: v for k, v in data.items() if k not in ("description", "price", "peak")}


def check_hardware_profile(ev: Evidence) -> Verdict:
    profile = ev.profile
    claimed_id = ev.claim("hardware", "profile")
    if claimed_id != profile.id:
        return Verdict(False, f"result.json names profile {claimed_id!r}, the bundle's {PROFILE_FILE} is {profile.id!r}")
    problems = []
    repo = ev.repository_profile_data
    if repo is not None:
        diffs = differences(_rules(repo), _rules(ev.profile_data))
        if diffs:
            path = ev.auditor.repository_profile_path(profile.id)
            problems.append(f"the bundle's {PROFILE_FILE} rules differ from {path} at: {', '.join(diffs)}")
    if problem := isolation_problem(ev):
        problems.append(problem)
    mismatches = [str(m) for m in match_nodes(profile, ev.node_fingerprints)]
    hardware = ev.claim_object("hardware")
    if hardware.get("matched") != (not mismatches) or list(hardware.get("mismatches") or []) != mismatches:
        problems.append(
            f"result.json says matched={hardware.get('matched')} {hardware.get('mismatches')}, "
            f"the fingerprint gives {mismatches or 'a match'}"
        )
    if mismatches:
        if ev.claim("conforming"):
            problems.append(f"the host does not match {profile.id} yet the result claims to conform: {'; '.join(mismatches)}")
        elif hardware.get("allowed_mismatch") and ev.smoke and not problems:
            # A smoke run checks the plumbing on any host; it is reported non-conforming.
            return Verdict(True, f"a smoke run, on other hardware than {profile.id} (non-conforming): "
                           + "; ".join(mismatches))
        elif hardware.get("allowed_mismatch"):
            problems.append(
                f"reported: a NON-CONFORMING result, run with an allowed hardware mismatch on {profile.id}: {'; '.join(mismatches)}"
            )
        else:
            problems.append(f"the host does not match {profile.id}: {'; '.join(mismatches)}")
    if problems:
        return Verdict(False, "; ".join(problems))
    cpu = ev.fingerprint.get("cpu") or {}
    engine = ev.fingerprint.get("docker") or {}
    ran = f"; ran on {engine.get('product') or 'Docker Engine'} {engine.get('version')}" if engine.get("version") else ""
    return Verdict(True,
        f"fingerprint ({cpu.get('model_name')}, {cpu.get('logical_cores')} cores) matches {profile.id}{ran}",
    )


def _price_text(price) -> str:
    return f"${price.usd_per_hour}/h ({price.region}, {price.date})"


def check_cost(ev: Evidence) -> Verdict:
    profile = ev.profile
    price = profile.price
    problems = []
    repo = ev.repository_profile
    if repo is not None and repo.price != price:
        problems.append(
            f"the bundle's {PROFILE_FILE} prices {profile.id} at {_price_text(price)}, "
            f"the repository's {ev.auditor.repository_profile_path(profile.id)} at {_price_text(repo.price)}"
        )
    cost = ev.claim_object("cost")
    for field, value in price_fields(profile).items():
        if cost.get(field) != value:
            problems.append(f"cost.{field} is {cost.get(field)!r}, the profile's {value!r}")
    line = ev.timeline  # Unavailable -> this check fails: no TTA, no dollars
    tta = time_to_accuracy(line, [s.meets for s in ev.scored_from_events])
    # a TTA has its seconds exactly when it was reached
    training_usd = cost_usd(tta.seconds, profile, len(ev.node_fingerprints)) if tta.seconds is not None else None
    if not close(cost.get("training_usd"), training_usd, abs_tol=1e-12, rel_tol=RELATIVE):
        problems.append(f"training_usd claimed {shown(cost.get('training_usd'))}, recomputed {shown(training_usd)}")
    for backend, record in sorted(ev.claim_object("inference").items()):
        if not isinstance(record, dict) or record.get("latency_ms") is None:
            continue
        mean_ms = record["latency_ms"].get("mean")  # itself recomputed by the inference-gate check
        if not isinstance(mean_ms, (int, float)):
            problems.append(f"inference.{backend} has no mean latency")
            continue
        want = cost_per_10k_usd(mean_ms / 1e3, price.usd_per_hour)
        if not close(record.get("cost_per_10k_usd"), want, abs_tol=1e-15, rel_tol=RELATIVE):
            problems.append(
                f"inference.{backend}.cost_per_10k_usd claimed {shown(record.get('cost_per_10k_usd'))}, "
                f"recomputed {shown(want)}"
            )
    if problems:
        return Verdict(False, "; ".join(problems))
    total = f"${training_usd:.6f}" if training_usd is not None else "none (threshold not reached)"
    return Verdict(True, f"training cost {total} at {_price_text(price)}")


def ran_on_host(ev: Evidence) -> bool:
    """The fingerprint says the entry ran with the host's own packages (the host engine): its
    lock was never installed, and the run cannot count."""
    engine = ev.fingerprint.get("docker") if isinstance(ev.fingerprint, dict) else None
    return isinstance(engine, dict) and (engine.get("engine") == "host" or engine.get("isolated") is False)


def isolation_problem(ev: Evidence) -> str | None:
    """A run the fingerprint places on an engine that does not isolate it must say so in
    result.json (``isolation``), which every view reads as "does not count"."""
    if not ran_on_host(ev):
        return None
    recorded = ev.claim("isolation")
    engine = (ev.fingerprint.get("docker") or {}).get("engine")
    if not isinstance(recorded, dict) or recorded.get("isolated") is not False \
            or not str(recorded.get("why_not") or "").startswith(f"engine {engine}"):
        return (f"the fingerprint says the {engine} engine ran the entry without its image, and result.json does "
                f"not record that the run was not isolated (isolation: {str(recorded)[:80]})")
    return None
