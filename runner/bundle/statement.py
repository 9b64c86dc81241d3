"""The in-toto Statement v1 a bundle signs: every file as a subject, the claim as predicate."""

from __future__ import annotations

import json

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"


def build_statement(digests: dict[str, str], predicate_type: str, predicate: dict) -> dict:
    return {
        "_type": STATEMENT_TYPE,
        "subject": [{"name": name, "digest": {"sha256": d}} for name, d in sorted(digests.items())],
        "predicateType": predicate_type,
        "predicate": predicate,
    }


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
