"""One result folder per run (layout in docs/results.md)."""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path


def new_run_id(seed: int) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-s{seed}-{secrets.token_hex(3)}"


def write_json(path: Path, data: dict) -> None:
    """Write atomically: a crash mid-write leaves the previous file, never half a file."""
    write_text_atomically(path, [json.dumps(data, indent=2, sort_keys=True) + "\n"])


def write_text_atomically(path: Path, chunks: Iterable[str]) -> None:
    """``chunks`` written in order to a temporary file that then replaces ``path``."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w") as fh:
        fh.writelines(chunks)
    os.replace(tmp, path)
