"""The figures DAWNBench shows for one run, from its typed result and its events."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runner.claims import result_claim
from runner.errors import UserError
from runner.events import read_events
from runner.results.record import Result
from runner.safe_read import visible
from runner.score.tta import EVAL_FREEZE, EVAL_THAW


@dataclass
class RunFigures:
    entry: str
    framework: str  # "tensorflow 2.21.0"
    run_id: str
    smoke: bool
    conforming: bool
    reached: bool
    tta_seconds: float | None
    epochs_to_threshold: int | None
    seconds_per_epoch: float | None
    epoch_source: str  # "epoch events" or "between evaluations"
    cost_usd: float | None
    latency_p50_ms: dict[str, float] = field(default_factory=dict)  # backend -> p50
    profile: str = ""  # the claim's profile it is compared with (runner.claims.result_claim), else its own
    tta_resolution_seconds: float | None = None  # the step its evaluations time TTA in (None: not stated)


def _epoch_seconds_from_markers(events) -> list[float]:
    """Each epoch's host-stamped length, from the entry's epoch_start/epoch_stop pairs."""
    starts, lengths = {}, []
    for ev in events:
        epoch = ev.metadata.get("epoch_num") if isinstance(ev.metadata, dict) else None
        if ev.origin == "runner" or not isinstance(epoch, int):
            continue
        if ev.key == "epoch_start":
            starts[epoch] = ev.t
        elif ev.key == "epoch_stop" and epoch in starts:
            lengths.append(ev.t - starts.pop(epoch))
    return lengths


def _epoch_seconds_between_evaluations(events) -> list[float]:
    """Wall time between one evaluation's thaw and the next one's freeze (the runner's own events)."""
    thaw, lengths = None, []
    for ev in events:
        if ev.origin != "runner":
            continue
        if ev.key == EVAL_FREEZE and thaw is not None:
            lengths.append(ev.t - thaw)
        elif ev.key == EVAL_THAW:
            thaw = ev.t
    return lengths


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def figures(folder: Path) -> RunFigures:
    folder = Path(folder)
    try:
        result = Result.read(folder)
    except UserError:
        raise  # the file and why, in one line (runner.safe_read)
    except (OSError, ValueError) as err:
        raise UserError(f"cannot read the result in {folder}: {err}", "pass result folders written by runner reproduce") from None
    training = result.training
    try:
        events = read_events(folder / "events.jsonl") if (folder / "events.jsonl").is_file() else []
    except (OSError, ValueError) as err:
        raise UserError(f"{visible(str(folder / 'events.jsonl'))}: {visible(str(err))}",
                        "pass result folders written by runner reproduce") from None
    epochs = _epoch_seconds_from_markers(events)
    source = "epoch events"
    if not epochs:
        epochs, source = _epoch_seconds_between_evaluations(events), "between evaluations"
    epochs_to_threshold = None
    if training and training.reached and training.crossing is not None:
        crossing = next((e for e in training.evaluations if e.get("index") == training.crossing), None)
        epochs_to_threshold = crossing.get("epoch") if crossing else None
    latency = {}
    for backend, record in result.inference.items():
        p50 = record.latency_ms.get("p50") if isinstance(record.latency_ms, dict) else None
        if isinstance(p50, (int, float)):
            latency[backend] = float(p50)
    framework = result.entry.framework or {}
    applies = result_claim(folder)
    own = str((result.hardware or {}).get("profile") or "")
    return RunFigures(
        entry=result.entry.name,
        framework=f"{framework.get('name', '?')} {framework.get('version', '')}".strip(),
        run_id=result.run_id,
        smoke=result.smoke,
        conforming=result.conforming,
        reached=bool(training and training.reached),
        tta_seconds=result.tta_seconds,
        epochs_to_threshold=epochs_to_threshold,
        seconds_per_epoch=_median(epochs),
        epoch_source=source,
        cost_usd=result.cost.training_usd if result.cost else None,
        latency_p50_ms=latency,
        profile=applies.profile if applies and applies.comparable else own,
        tta_resolution_seconds=training.tta_resolution_seconds if training and training.reached else None,
    )
