"""The whole host fingerprint: one JSON-able dict, recorded in every result."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from runner.engine.interface import Engine
from runner.errors import UserError
from runner.fingerprint.cpu import capture_cpu
from runner.fingerprint.docker_engine import capture_docker
from runner.fingerprint.gpu import capture_gpu
from runner.fingerprint.memory import capture_memory
from runner.fingerprint.operating_system import capture_host_identity, capture_os

SCHEMA_VERSION = 1


def node_file(node: int) -> str:
    """A result folder's fingerprint of node ``node`` of its run (0: the run's own host)."""
    return "fingerprint.json" if node == 0 else f"fingerprint-node{node}.json"


def capture_host(engine: Engine | None = None, nvml: ModuleType | None = None) -> dict:
    """Fingerprint this host. ``engine``: the container engine (None: the one in use, if it answers)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "captured_at": datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
        "host": capture_host_identity(),
        "cpu": capture_cpu(),
        "memory": capture_memory(),
        "os": capture_os(),
        "gpu": capture_gpu(nvml),
        "docker": capture_docker(engine),
    }


def load_fingerprint(path: str | Path) -> dict:
    """Read a fingerprint JSON file (a result's ``fingerprint.json`` or a saved capture)."""
    file = Path(path)
    try:
        data = json.loads(file.read_text())
    except FileNotFoundError:
        raise UserError(f"no fingerprint file at {path}", "pass a file written by `runner fingerprint --format json`") from None
    except (OSError, ValueError) as err:
        raise UserError(f"{path} is not a readable JSON fingerprint ({err})", "write one with `runner fingerprint --format json -o FILE`") from None
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise UserError(
            f"{path} is not a fingerprint of schema version {SCHEMA_VERSION}",
            "write one with `runner fingerprint --format json -o FILE`",
        )
    missing = [s for s in ("cpu", "memory", "gpu") if not isinstance(data.get(s), dict)]
    if missing:
        raise UserError(f"{path} has no {', '.join(missing)} section", "capture it again with `runner fingerprint`")
    return data
