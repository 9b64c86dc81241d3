"""Events of a run, stamped on the host's clock: the entry's MLPerf-style
``:::MLLOG {json}`` lines, and the runner's own events.

The entry's own ``time_ms`` is kept for reference but never used: an event's time is
when its line reached the host, on the monotonic clock, relative to the container start.
Only events whose ``origin`` is ``runner`` drive the clock (the launch stamp, the
freezes around evaluations): the entry can print any key it likes, and its lines are
parsed with ``origin="entry"`` whatever they say.
"""

from __future__ import annotations

import errno
import io
import json
import math
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from runner.safe_read import Unreadable, open_file

PREFIX = ":::MLLOG"
ENTRY, RUNNER = "entry", "runner"

# What one entry can make the runner parse and keep. A line over a limit is ignored like a
# malformed one, and counted (``dropped()``), so the result can say events were lost.
MAX_LINE_CHARS = 64 * 1024
MAX_DEPTH = 32
MAX_INT_DIGITS = 40
MAX_EVENTS = 100_000
# events.jsonl re-read by verify: a written event is at most a line plus its host fields.
MAX_STORED_LINE_CHARS = 2 * MAX_LINE_CHARS

_dropped: Counter = Counter()
_dropped_lock = threading.Lock()


def _drop(why: str) -> None:
    with _dropped_lock:
        _dropped[why] += 1


def dropped() -> dict[str, int]:
    """MLLOG lines ignored so far in this process, by reason (too long, too deep, ...)."""
    with _dropped_lock:
        return dict(_dropped)


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _no_constant(name: str):
    raise ValueError(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"non-finite number {text[:20]}")
    return value


def _depth_within(obj: object, limit: int) -> bool:
    """Nesting depth of parsed JSON, walked without recursion."""
    stack = [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            if depth > limit:
                return False
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return True


def bounded_json(text: str) -> object:
    """``json.loads`` with the limits above: ValueError for anything over them, never
    RecursionError or a huge integer's quadratic conversion."""
    try:
        value = json.loads(text, parse_int=_bounded_int, parse_float=_finite_float,
                           parse_constant=_no_constant)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if (text.count("[") + text.count("{")) > MAX_DEPTH and not _depth_within(value, MAX_DEPTH):
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    return value


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
    start = line.find(PREFIX, 0, MAX_LINE_CHARS)
    if start < 0:
        return None
    if len(line) > MAX_LINE_CHARS:
        _drop("line longer than 64 KiB")
        return None
    if seq >= MAX_EVENTS:
        _drop(f"more than {MAX_EVENTS} events")
        return None
    try:
        body = bounded_json(line[start + len(PREFIX):].strip())
    except ValueError as exc:  # JSONDecodeError is one; so are the limits
        if not isinstance(exc, json.JSONDecodeError):
            _drop(str(exc))
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
    """Events written by ``write_events``; ValueError for a file over the limits (a
    hostile bundle's events.jsonl), never a RecursionError or an unbounded read."""
    events: list[Event] = []
    try:  # a regular file within the cap of an events file (runner.safe_read): a FIFO never blocks
        raw, _ = open_file(path, "events")
    except Unreadable as err:
        if err.why == "does not exist":
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(path)) from None
        raise ValueError(err.problem) from None
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace") as fh:
        while line := fh.readline(MAX_STORED_LINE_CHARS + 1):
            if len(line) > MAX_STORED_LINE_CHARS:
                raise ValueError(f"line {len(events) + 1} is longer than {MAX_STORED_LINE_CHARS} characters")
            if not line.strip():
                continue
            if len(events) >= MAX_EVENTS:
                raise ValueError(f"more than {MAX_EVENTS} events")
            data = bounded_json(line)
            if not isinstance(data, dict):
                raise ValueError(f"line {len(events) + 1} is not an event object")
            try:
                events.append(Event(**data))
            except TypeError:
                raise ValueError(f"line {len(events) + 1} does not have an event's fields") from None
    return events
