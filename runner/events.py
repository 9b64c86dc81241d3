"""Events of a run, stamped on the host's clock: the entry's MLPerf-style
``:::MLLOG {json}`` lines, and the runner's own events.

The entry's own ``time_ms`` is kept for reference but never used: an event's time is
when its line reached the host, on the monotonic clock, relative to the container start.
Only events whose ``origin`` is ``runner`` drive the clock (the launch stamp, the
freezes around evaluations): the entry can print any key it likes, and its lines are
parsed with ``origin="entry"`` whatever they say.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

PREFIX = ":::MLLOG"
ENTRY, RUNNER = "entry", "runner"


@dataclass(frozen=True)
class Event:
    seq: int  # arrival order
    t: float  # seconds since the container started, host monotonic clock
    key: str
    value: object = None
    metadata: dict = field(default_factory=dict)
    event_type: str | None = None
    entry_time_ms: float | None = None  # what the entry claimed; informational only
    origin: str = ENTRY  # "runner" only for events the runner made itself


def runner_event(seq: int, t: float, key: str, **metadata) -> Event:
    return Event(seq=seq, t=t, key=key, metadata=metadata, origin=RUNNER)


def parse_line(line: str, seq: int, t: float) -> Event | None:
    """An ``Event`` for an MLLOG line, None for any other line (or a malformed one)."""
    start = line.find(PREFIX)
    if start < 0:
        return None
    try:
        body = json.loads(line[start + len(PREFIX):].strip())
    except json.JSONDecodeError:
        return None
    if not isinstance(body, dict) or not isinstance(body.get("key"), str):
        return None
    metadata = body.get("metadata")
    return Event(
        seq=seq,
        t=t,
        key=body["key"],
        value=body.get("value"),
        metadata=metadata if isinstance(metadata, dict) else {},
        event_type=body.get("event_type"),
        entry_time_ms=body.get("time_ms"),
    )


def write_events(path: Path, events: list[Event]) -> None:
    with open(path, "w") as fh:
        for ev in events:
            fh.write(json.dumps(asdict(ev), sort_keys=True) + "\n")


def read_events(path: Path) -> list[Event]:
    with open(path) as fh:
        return [Event(**json.loads(line)) for line in fh if line.strip()]
