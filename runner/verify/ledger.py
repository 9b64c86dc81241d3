"""What ``runner verify`` checks of a run's place in its key's ledger (``runner.keys.ledger``).

A signed result records where it stands in the ledger of the key that signed it: the index of
its line, the head it followed and how many runs of the entry the key had made (``ledger`` in
result.json, signed with it). One bundle is held to its own key and to a ledger the key's
owner published (``--ledger``: the chain intact, this result's digest at its index, the count
of the entry's runs the chain's); several bundles of one key are held to each other (no index
claimed twice for different results, counts that never fall and cover the runs given). So a
claim cannot quietly be the best of many invocations: the count is signed, and a ledger that
leaves runs out breaks the chain the bundles' heads are part of.
"""

from __future__ import annotations

from pathlib import Path

from runner import safe_read
from runner.errors import UserError
from runner.keys.ledger import chain_problem, line_hash, parse, position_problem, runs_of
from runner.results.record import RESULT_FILE
from runner.verify.evidence import Evidence, Unavailable
from runner.verify.report import CheckResult, LedgerClaim, Verdict

LEDGER_LIMIT_BYTES = safe_read.LIMITS["ledger"]
ACROSS = "ledger-across-bundles"


def read_published(path: Path) -> tuple[str, list]:
    """A ledger file its key's owner published (``runner ledger export``): its key id and its
    lines as JSON values, unjudged (``check_ledger`` says whether they chain)."""
    try:
        lines = parse(safe_read.read_text(path.resolve() if path.is_symlink() else path, "ledger"))
    except safe_read.Unreadable as err:
        raise UserError(f"cannot read the ledger {err.problem}", "pass a *.jsonl ledger file") from None
    except ValueError as err:
        raise UserError(f"{path} is not a ledger ({err})", "pass the file `runner ledger export` wrote") from None
    key = lines[0].get("key") if lines and isinstance(lines[0], dict) else None
    if not isinstance(key, str):
        raise UserError(f"{path} is not a ledger (its first line names no key)",
                        "pass the file `runner ledger export` wrote")
    return key, lines


def check_ledger(ev: Evidence) -> Verdict:
    """The result's ledger place is its signer's and well formed; with the key's published
    ledger, the chain is intact and holds this result at its index."""
    place = ev.claim("ledger")
    if place is None:
        return Verdict(True, "no ledger place: signed before the runner kept a ledger (how many runs of the "
                             "entry its key made is not said)")
    if (problem := position_problem(place)) or not isinstance(place, dict):  # no problem: an object
        return Verdict(False, f"result.json's ledger place is malformed: {problem}")
    key = ev.signer_key.keyid
    if place["key_id"] != key:
        return Verdict(False, f"result.json's ledger is key {place['key_id'][:16]}'s, the bundle is signed by {key[:16]}")
    said = f"index {place['index']} of key {key[:16]}'s ledger, run {place['entry_runs']} of this entry with this key"
    lines = ev.auditor.ledgers.get(key)
    if lines is None:
        return Verdict(True, f"{said} (no --ledger of this key given: the chain is not checked)")
    if problem := chain_problem(lines):
        return Verdict(False, f"the ledger given for key {key[:16]} is broken at {problem}")
    index = place["index"]
    if index >= len(lines):
        return Verdict(False, f"{said}, but the ledger given has {len(lines)} lines: it leaves this run out")
    line = lines[index]
    previous = lines[index - 1]["hash"] if index else place["previous"]
    digest = ev.actual_digests.get(RESULT_FILE)
    smoke = bool(ev.claim("smoke"))
    problems = []
    if previous != place["previous"]:
        problems.append(f"the head before it is {previous[:16]}, result.json says {place['previous'][:16]}")
    if (line["run_id"], line["entry"], line["smoke"]) != (ev.claim("run_id"), ev.claim("entry", "name"), smoke):
        problems.append(f"the line is run {line['run_id']} of {line['entry']}")
    if line["result_sha256"] != digest:
        problems.append(f"the line's result digest {line['result_sha256'][:16]} is not this result.json's "
                        f"({str(digest)[:16]})")
    counted = len(runs_of(lines[:index + 1], line["entry"], line["smoke"]))
    if counted != place["entry_runs"]:
        problems.append(f"the ledger counts {counted} runs of the entry to it, result.json {place['entry_runs']}")
    if problems:
        return Verdict(False, f"at index {index} of the ledger given: " + "; ".join(problems))
    total = len(runs_of(lines, line["entry"], line["smoke"]))
    return Verdict(True, f"{said}; the ledger given ({len(lines)} lines, intact, head {line_hash(lines[-1])[:16]}) "
                         f"holds it there, and {total} runs of this entry in all")


def claim_of(ev: Evidence, label: str) -> LedgerClaim | None:
    """The bundle's ledger place when it is well formed and its signer's (None otherwise: the
    bundle's own ``ledger`` check says why)."""
    place = ev.claim("ledger")
    try:
        if position_problem(place) or not isinstance(place, dict) or place["key_id"] != ev.signer_key.keyid:
            return None
        return LedgerClaim(label, place["key_id"], place["index"], place["previous"], place["entry_runs"],
                           str(ev.claim("entry", "name")), bool(ev.claim("smoke")), str(ev.claim("run_id")),
                           ev.actual_digests.get(RESULT_FILE, ""))
    except (Unavailable, TypeError, ValueError, KeyError, OSError):  # a hostile bundle: its own checks fail
        return None


def across_problems(claims: list[LedgerClaim]) -> list[str]:
    """Where bundles of one key contradict each other: one index for two results, a count of
    an entry's runs that falls as the index grows, or that leaves out runs given at or before it."""
    problems = []
    by_index: dict[tuple[str, int], LedgerClaim] = {}
    for c in sorted(claims, key=lambda c: (c.key_id, c.index)):
        other = by_index.setdefault((c.key_id, c.index), c)
        if other is not c and (other.run_id, other.result_sha256) != (c.run_id, c.result_sha256):
            problems.append(f"{other.bundle} and {c.bundle} both stand at index {c.index} of key {c.key_id[:16]}'s "
                            "ledger with different results")
    for c in claims:
        same = [o for o in claims if (o.key_id, o.entry, o.smoke) == (c.key_id, c.entry, c.smoke)]
        if falls := [o for o in same if o.index < c.index and o.entry_runs > c.entry_runs]:
            problems.append(f"{c.bundle} says run {c.entry_runs} of {c.entry} at index {c.index}, after "
                            f"{falls[0].bundle} said {falls[0].entry_runs} at index {falls[0].index}")
        runs = {o.run_id for o in same if o.index <= c.index}
        if len(runs) > c.entry_runs:
            problems.append(f"{c.bundle} says {c.entry_runs} run(s) of {c.entry} to index {c.index}; the bundles "
                            f"given hold {len(runs)}")
    return list(dict.fromkeys(problems))


def check_across(claims: list[LedgerClaim], bundles: int) -> CheckResult:
    """The bundles' ledger places together (``runner verify`` with several bundles)."""
    problems = across_problems(claims)
    if problems:
        return CheckResult(ACROSS, False, "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more"
                                                                      if len(problems) > 5 else ""))
    keys = {c.key_id for c in claims}
    counts: dict[tuple[str, str, bool], int] = {}
    for c in claims:
        group = (c.key_id, c.entry, c.smoke)
        counts[group] = max(counts.get(group, 0), c.entry_runs)
    runs = "; ".join(f"{len({c.run_id for c in claims if (c.key_id, c.entry, c.smoke) == g})} of {n} "
                     f"{'smoke ' if g[2] else ''}runs of {g[1]} with key {g[0][:16]}" for g, n in sorted(counts.items()))
    return CheckResult(ACROSS, True, f"{len(claims)} of {bundles} bundles carry a ledger place, {len(keys)} key(s), "
                                     f"consistent" + (f": {runs}" if runs else ""))
