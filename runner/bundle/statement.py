"""The in-toto Statement v1 a bundle signs: every file as a subject, the claim as predicate.

The Statement is made with in-toto's own bindings (``in_toto_attestation.v1``: a
``ResourceDescriptor`` per file, the ``Statement``'s validation) and written as the JSON they
give, with one exception: the predicate is attached as the claim's own JSON object. The bindings
hold a predicate as a protobuf ``Struct``, whose only number is a double: ``"seed": 0`` would
come back as ``0.0`` and a 17-digit integer rounded, so neither the signed bytes nor the claim
``verify`` rebuilds would be the runner's. The JSON is the same as the hand-built Statement of
older bundles, byte for byte once serialised (tests/test_bundle.py holds it to the archive's).
"""

from __future__ import annotations

import json

from google.protobuf.json_format import MessageToDict
from in_toto_attestation.v1.resource_descriptor import ResourceDescriptor
from in_toto_attestation.v1.statement import STATEMENT_TYPE_URI, Statement

STATEMENT_TYPE = STATEMENT_TYPE_URI  # "https://in-toto.io/Statement/v1"


def build_statement(digests: dict[str, str], predicate_type: str, predicate: dict) -> dict:
    """The Statement as a JSON object; ValueError when in-toto's validation refuses it (no
    subject, a subject without a digest, no predicate type or an empty predicate)."""
    subjects = [ResourceDescriptor(name=name, digest={"sha256": d}).pb for name, d in sorted(digests.items())]
    # The bindings see the predicate as JSON would carry it (keys as strings, tuples as lists).
    statement = Statement(subjects, predicate_type, json.loads(json.dumps(predicate)))
    statement.validate()
    framed = MessageToDict(statement.pb)
    return {**framed, "predicate": predicate}


def serialize(statement: dict) -> bytes:
    """Canonical enough to be stable: sorted keys, no insignificant white space."""
    return json.dumps(statement, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def subjects(statement: dict) -> dict[str, str]:
    """``{name: sha256}`` of a parsed Statement; ValueError if it is not a Statement v1."""
    if not isinstance(statement, dict) or statement.get("_type") != STATEMENT_TYPE:
        raise ValueError(f"not an in-toto Statement v1 (_type {statement.get('_type')!r})"
                         if isinstance(statement, dict) else "not an in-toto Statement")
    items = statement.get("subject")
    if not isinstance(items, list):
        raise ValueError("the Statement has no subject list")
    out: dict[str, str] = {}
    for item in items:
        name = item.get("name") if isinstance(item, dict) else None
        digest = item.get("digest", {}).get("sha256") if isinstance(item, dict) and isinstance(item.get("digest"), dict) else None
        if not isinstance(name, str) or not isinstance(digest, str):
            raise ValueError(f"malformed subject {item!r}")
        if name in out:
            raise ValueError(f"subject {name} appears twice")
        out[name] = digest
    return out
