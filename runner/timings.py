"""Where a reproduction's wall time goes: the runner's own phases, in the order they ran.

The runner's cost is what a user pays on top of a plain ``docker run`` of the same training
(``runner bench overhead``). Each result carries a ``timings`` section so that cost can be
read from any run, not only from a benchmark: the phases shared by every run of one
reproduction (host checks, data, image, fingerprint, audit), then this run's (launch,
training with each frozen evaluation and its parts, the evaluations after the container
exited, scoring, inference with LoadGen apart, the MLPerf log, the runner's record of the
files it measured, the cross-seed checks (on the first run's clock), writing). Signing
happens after ``result.json`` is final, so its time is shown by the terminal (``-v``) and
by ``runner bench overhead``'s stopwatch, not stored.

Only wall time measured with the host's monotonic clock is kept; nothing here is a score.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

from rich.table import Table

from runner.events import RUNNER
from runner.report import reporter
from runner.score.tta import CONTAINER_EXIT, EVAL_FREEZE, EVAL_THAW, LAUNCH


@dataclass
class Timings:
    """Named phases in the order they ran; a phase may carry its parts (seconds by name)."""

    phases: list[dict] = field(default_factory=list)

    @contextmanager
    def phase(self, name: str):
        """Time the block as ``name``; the reporter shows it as a phase (a line, a heartbeat in
        a log) until a phase of its own inside says more."""
        started = time.monotonic()
        try:
            with reporter().phase(name):
                yield
        finally:
            self.add(name, time.monotonic() - started)

    def add(self, name: str, seconds: float, parts: dict | None = None) -> None:
        record: dict = {"name": name, "seconds": round(seconds, 4)}
        if parts:
            record["parts"] = parts
        self.phases.append(record)

    def extend(self, other: Timings) -> Timings:
        return Timings([*self.phases, *other.phases])

    def to_dict(self) -> dict:
        return {"phases": list(self.phases), "total_seconds": round(sum(p["seconds"] for p in self.phases), 4)}


def training_parts(events, phase_seconds: float | None, before_start: float = 0.0) -> dict:
    """The training phase split by the runner's events: what came before the container
    started (``before_start``: the evaluator's and the container's start), the launch
    (container start -> the launcher's stamp), the time the entry ran, each evaluation's
    frozen window (with the evaluator's builder and prediction seconds, spent after the
    container exited), when the evaluator was ready (on the entry's clock) and, after the
    container exited, the evaluations, the final model's and the sensitivity checks."""
    ours = [e for e in events if e.origin == RUNNER]
    launch = next((e.t for e in ours if e.key == LAUNCH), None)
    exit_t = next((e.t for e in ours if e.key == CONTAINER_EXIT), None)
    freezes = {e.metadata.get("index"): e.t for e in ours if e.key == EVAL_FREEZE}
    evaluations = []
    for e in ours:
        if e.key != EVAL_THAW or e.metadata.get("index") not in freezes:
            continue
        item = {"index": e.metadata["index"], "frozen_seconds": round(e.t - freezes[e.metadata["index"]], 4)}
        for key in ("builder_seconds", "predict_seconds"):
            if isinstance(e.metadata.get(key), (int, float)):
                item[key] = round(e.metadata[key], 4)
        evaluations.append(item)
    frozen = sum(item["frozen_seconds"] for item in evaluations)
    parts: dict = {"before_start_seconds": round(before_start, 4),
                   "launch_seconds": round(launch, 4) if launch is not None else None}
    if exit_t is not None:
        parts["entry_running_seconds"] = round(exit_t - (launch or 0.0) - frozen, 4)
        if phase_seconds is not None:  # the final model's and the sensitivity evaluations, clean-up
            parts["after_exit_seconds"] = round(max(0.0, phase_seconds - before_start - exit_t), 4)
    start = next((e for e in ours if e.key == "evaluator_start"), None)
    if start is not None and isinstance(start.metadata.get("ready_at"), (int, float)):
        # on the entry's clock: the evaluator got ready beside the entry's start-up, then froze
        parts["evaluator_ready_at_seconds"] = round(start.metadata["ready_at"], 4)
    parts["frozen_seconds"] = round(frozen, 4)
    parts["evaluations"] = evaluations
    return parts


MOMENT_SUFFIX = "_at_seconds"  # a part that is a moment on the entry's clock, not a duration


def render_timings(timings: dict, title: str = "where the time went"):
    """A rich table of a result's ``timings`` section (phases, then their parts indented). The
    parts that are moments (``..._at_seconds``: when the evaluator was ready, on the entry's
    clock) are not durations to add up: they go below the table, in its caption."""
    table = Table(title=title, title_justify="left", caption_justify="left")
    table.add_column("phase")
    table.add_column("seconds", justify="right", no_wrap=True)
    moments = []
    for phase in timings.get("phases") or []:
        table.add_row(phase["name"], f"{phase['seconds']:.2f}")
        parts = phase.get("parts") or {}
        for key, value in parts.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            name = key.removesuffix("_seconds").replace("_", " ")
            if key.endswith(MOMENT_SUFFIX):
                moments.append(f"{name} {value:.2f} s on the entry's clock ({phase['name']})")
            else:
                table.add_row(f"  {name}", f"{value:.2f}")
        for item in parts.get("evaluations") or []:
            inner = ", ".join(f"{k.removesuffix('_seconds')} {v:.2f}" for k, v in item.items()
                              if k not in ("index", "frozen_seconds"))
            # the row's seconds are its frozen window (the copy); builder and predict ran after exit
            table.add_row(f"  evaluation {item['index']} window" + (f" (then {inner})" if inner else ""),
                          f"{item['frozen_seconds']:.2f}")
    table.add_row("[bold]total[/]", f"{timings.get('total_seconds', 0):.2f}")
    if moments:
        table.caption = "moments, not durations: " + "; ".join(moments)
    return table
