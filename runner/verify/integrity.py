"""Checks that the bundle is what its signer signed: signature, trust, type, files, claim."""

from __future__ import annotations

import json

from securesystemslib.exceptions import VerificationError

from runner.bundle.claim import PREDICATE_TYPE, build_predicate, differences
from runner.bundle.signing import PAYLOAD_TYPE
from runner.bundle.statement import STATEMENT_TYPE, subjects
from runner.verify.evidence import Evidence, Unavailable
from runner.verify.report import Verdict


def _short(keyid: str) -> str:
    return keyid[:16]


def check_signature(ev: Evidence) -> Verdict:
    """The envelope's signature verifies under the public key shipped in the bundle."""
    envelope, key = ev.envelope, ev.signer_key
    if key.keyid not in envelope.signatures:
        ids = ", ".join(_short(k) for k in envelope.signatures) or "none"
        return Verdict(False, f"no signature by the bundled key {_short(key.keyid)} (signatures by: {ids})")
    try:
        envelope.verify([key], 1)
    except (VerificationError, ValueError) as err:
        return Verdict(False, f"the signature by {_short(key.keyid)} does not verify ({err})")
    return Verdict(True, f"valid Ed25519 signature by key {_short(key.keyid)}")


def check_trusted_key(ev: Evidence) -> Verdict:
    trusted = ev.auditor.trusted_keys
    if not trusted:
        return Verdict(False, "no trusted keys given (pass --trusted-keys with the publisher's *.pub.json)")
    try:
        accepted = ev.envelope.verify(list(trusted), 1)  # a list of Key (a list is invariant)
    except (VerificationError, ValueError):
        ids = ", ".join(_short(k) for k in ev.envelope.signatures) or "no key"
        return Verdict(False,
            f"signed by {ids}, which is not among the {len(trusted)} trusted key(s) "
            f"({', '.join(_short(k.keyid) for k in trusted)})",
        )
    return Verdict(True, f"signed by trusted key {', '.join(_short(k) for k in accepted)}")


def check_payload_type(ev: Evidence) -> Verdict:
    envelope = ev.envelope
    if envelope.payload_type != PAYLOAD_TYPE:
        return Verdict(False, f"payloadType is {envelope.payload_type!r}, expected {PAYLOAD_TYPE!r}")
    statement = ev.statement
    if statement.get("_type") != STATEMENT_TYPE:
        return Verdict(False, f"_type is {statement.get('_type')!r}, expected {STATEMENT_TYPE!r}")
    if statement.get("predicateType") != PREDICATE_TYPE:
        return Verdict(False, f"predicateType is {statement.get('predicateType')!r}, expected {PREDICATE_TYPE!r}"
        )
    return Verdict(True, f"in-toto Statement v1, predicate {PREDICATE_TYPE}")


def _signed_subjects(ev: Evidence) -> tuple[dict[str, str], str]:
    """The digests to check against: the signed subjects, else the unsigned manifest."""
    try:
        return subjects(ev.statement), "the signed statement"
    except Unavailable:
        return ev.manifest, "the UNSIGNED manifest"
    except ValueError as err:
        raise Unavailable(f"the statement's subjects are malformed ({err})") from None


def _listing(names: list[str], limit: int = 5) -> str:
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def check_file_digests(ev: Evidence) -> Verdict:
    expected, source = _signed_subjects(ev)
    actual = ev.actual_digests
    missing = sorted(set(expected) - set(actual))
    added = sorted(set(actual) - set(expected)) + ev.stray_bookkeeping
    changed = sorted(p for p in set(expected) & set(actual) if expected[p] != actual[p])
    problems = []
    if changed:
        problems.append(f"changed: {_listing(changed)}")
    if missing:
        problems.append(f"missing: {_listing(missing)}")
    if added:
        problems.append(f"added: {_listing(added)}")
    try:
        if ev.manifest != expected:
            problems.append("bundle/manifest.json disagrees with the signed subjects")
    except Unavailable as err:
        problems.append(str(err))
    if problems:
        return Verdict(False, f"against {source}: " + "; ".join(problems))
    return Verdict(True, f"{len(actual)} files match {source}, none missing or added")


def check_statement_matches_result(ev: Evidence) -> Verdict:
    """The signed predicate is exactly the claim rebuilt from result.json."""
    try:
        digests = subjects(ev.statement)
    except ValueError as err:
        raise Unavailable(f"the statement's subjects are malformed ({err})") from None
    expected = json.loads(json.dumps(build_predicate(ev.typed_result, digests)))
    diffs = differences(expected, ev.statement.get("predicate"))
    if diffs:
        return Verdict(False, f"the signed claim differs from result.json at: {_listing(diffs)}"
        )
    return Verdict(True, "the signed claim is result.json's")
