"""The run's event stream as the runner keeps it: the entry's parsed lines and the runner's
own stamped events, on the clock that starts with the training container.

The first line the container prints decides where TTA starts: the launcher's marker, if it
came first and soon enough, else the container's start (``LAUNCH``'s ``stamp``)."""

from __future__ import annotations

import time
from collections.abc import Callable

from runner.events import Event, parse_line, runner_event
from runner.score.tta import LAUNCH, LAUNCH_GAP_LIMIT_S

LAUNCH_MARKER = ":::RUNNER launch"


class EventLog:
    """The events in the order the runner handled them, and the clock they are stamped on."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.clock: Callable[[], float] = lambda: 0.0  # seconds since the container started
        self.started_unix_ms: int | None = None  # the host's unix time at t = 0
        self.started_monotonic: float | None = None  # the host's monotonic time at t = 0 (energy)
        self.seen_output = False

    def start(self, clock: Callable[[], float]) -> None:
        """The container runs: ``clock`` is its clock, and t = 0 is pinned to the host's times."""
        self.clock = clock
        self.started_unix_ms = int((time.time() - clock()) * 1000)
        self.started_monotonic = time.monotonic() - clock()

    def now(self) -> float:
        return self.clock()

    def add(self, event: Event) -> None:
        self.events.append(event)

    def ours(self, t: float, key: str, **metadata) -> Event:
        """A runner-stamped event at ``t``, appended."""
        event = runner_event(len(self.events), t, key, **metadata)
        self.add(event)
        return event

    def entry_line(self, line: str, t: float) -> Event | None:
        """The event a line of the entry's output carries (appended), if any. The first line
        stamps the launch: the launcher's marker is the clock's start if it came in time;
        anything else ran before the launcher spoke, and the clock falls back to the start."""
        if not self.seen_output:
            self.seen_output = True
            marker = line.strip() == LAUNCH_MARKER
            if marker and t <= LAUNCH_GAP_LIMIT_S:
                self.ours(t, LAUNCH, stamp="launcher")
                return None
            self.ours(0.0, LAUNCH, stamp="container-start", marker_at=t if marker else None,
                      first_line=None if marker else line[:200])
            if marker:
                return None
        event = parse_line(line, len(self.events), t)
        if event is not None:
            self.add(event)
        return event

    def ensure_launch(self) -> None:
        """The container printed nothing: the clock starts at its start."""
        if not self.seen_output:
            self.ours(0.0, LAUNCH, stamp="container-start", first_line=None)

    def drop(self, dropped: list[Event]) -> None:
        """Remove these very events (by identity: two events may be equal field for field)."""
        ids = {id(e) for e in dropped}
        self.events = [e for e in self.events if id(e) not in ids]

    def in_arrival_order(self) -> list[Event]:
        """Lines that were in flight while the runner froze the entry are stamped inside the
        frozen window but handled after it: every event ordered by its host time."""
        ordered = sorted(self.events, key=lambda e: (e.t, e.seq))
        return [Event(**{**e.__dict__, "seq": i}) for i, e in enumerate(ordered)]
