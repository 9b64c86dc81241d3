"""MLPerf-style ``:::MLLOG {json}`` lines, flushed at once so the host can stamp them
on its own clock as they arrive."""

from __future__ import annotations

import json
import sys
import time


def emit(key: str, value: object = None, event_type: str = "POINT_IN_TIME", **metadata: object) -> None:
    record = {
        "namespace": "runner.harness",
        "time_ms": time.time() * 1000,  # informational: the host never trusts it
        "event_type": event_type,
        "key": key,
        "value": value,
        "metadata": metadata,
    }
    sys.stdout.write(":::MLLOG " + json.dumps(record) + "\n")
    sys.stdout.flush()
