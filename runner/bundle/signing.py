"""Signing a Statement in a DSSE envelope (securesystemslib) and reading it back."""

from __future__ import annotations

import json
from pathlib import Path

from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import FormatError
from securesystemslib.signer import Signer

from runner import safe_read
from runner.bundle.statement import serialize

PAYLOAD_TYPE = "application/vnd.in-toto+json"


def sign_statement(statement: dict, signer: Signer) -> Envelope:
    envelope = Envelope(payload=serialize(statement), payload_type=PAYLOAD_TYPE, signatures={})
    envelope.sign(signer)
    return envelope


def write_envelope(path: Path, envelope: Envelope) -> None:
    path.write_text(json.dumps(envelope.to_dict(), indent=1, sort_keys=True) + "\n")


def read_envelope(path: Path) -> Envelope:
    """The envelope at ``path`` (read through ``runner.safe_read``: a regular file, at most
    16 MiB of depth-capped, finite JSON); ValueError if it is not a DSSE envelope."""
    try:
        data = safe_read.read_json(path, "json")
    except safe_read.Unreadable as err:
        raise ValueError(err.why) from None
    try:
        if not isinstance(data, dict) or not isinstance(data.get("signatures"), list):
            raise ValueError("no signatures list")
        return Envelope.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError, FormatError) as err:
        # bad JSON, bad base64 (binascii.Error is a ValueError), missing or mistyped fields
        raise ValueError(f"not a DSSE envelope: {type(err).__name__}: {err}") from None
