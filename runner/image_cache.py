"""What the runner learned about one Docker image (its software, its file audit), kept per
image id under the runner's home. An image never changes, so an answer about it never needs
recomputing; a missing, unreadable or damaged file only means computing it again."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from runner import paths


def _file(kind: str, image_id: str, prefix: str, suffix: str) -> Path:
    return paths.home() / kind / f"{prefix}{image_id.removeprefix('sha256:')}{suffix}.json"


def load(kind: str, image_id: str, *, prefix: str = "", suffix: str = "") -> dict | None:
    """The kept answer, or None when there is none (or it cannot be read as a JSON object)."""
    try:
        data = json.loads(_file(kind, image_id, prefix, suffix).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def store(kind: str, image_id: str, data: dict, *, prefix: str = "", suffix: str = "") -> None:
    path = _file(kind, image_id, prefix, suffix)
    part = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part.write_text(json.dumps(data))
        os.replace(part, path)  # whole or not at all: another process (or thread) may be reading it
    except OSError:  # a read-only or full runner home: the answer is computed again next time
        try:
            part.unlink(missing_ok=True)
        except OSError:
            pass
