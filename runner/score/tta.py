"""Time-to-accuracy from a stream of host-stamped events (DAWNBench's rulings).

TTA runs from ``run_start`` to the ``eval_stop`` of the first evaluation that meets the
threshold, minus the time inside every evaluation up to and including that one. The same
function serves ``reproduce`` and ``verify``, so an auditor recomputes exactly this.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from runner.run.events import Event


class EventStreamError(ValueError):
    """The events do not form a valid run (order, pairing, or a missing ``run_start``)."""


@dataclass(frozen=True)
class Evaluation:
    index: int  # 0-based, in the order evaluations happened
    epoch: int | None
    start: float  # host seconds since container start
    stop: float
    predictions: str  # path relative to the output folder

    @property
    def seconds(self) -> float:
        return self.stop - self.start


@dataclass(frozen=True)
class Timeline:
    run_start: float
    run_stop: float | None
    evaluations: list[Evaluation]

    def train_seconds_at(self, index: int) -> float:
        """Training time from run_start to the end of evaluation ``index``, evaluations excluded."""
        ev = self.evaluations[index]
        excluded = sum(e.seconds for e in self.evaluations[: index + 1])
        return ev.stop - self.run_start - excluded


def timeline(events: list[Event]) -> Timeline:
    """Check the stream's order and pair each ``eval_start`` with its ``eval_stop``."""
    for prev, cur in pairwise(events):
        if cur.seq <= prev.seq or cur.t < prev.t:
            raise EventStreamError(f"event {cur.seq} ({cur.key}) is out of order")
    starts = [e for e in events if e.key == "run_start"]
    if len(starts) != 1:
        raise EventStreamError(f"expected one run_start, found {len(starts)}")
    run_start = starts[0].t
    stops = [e for e in events if e.key == "run_stop"]
    evaluations: list[Evaluation] = []
    open_eval: Event | None = None
    for ev in events:
        if ev.key == "eval_start":
            if open_eval is not None:
                raise EventStreamError(f"eval_start at event {ev.seq} inside another evaluation")
            if ev.t < run_start:
                raise EventStreamError(f"eval_start at event {ev.seq} comes before run_start")
            open_eval = ev
        elif ev.key == "eval_stop":
            if open_eval is None:
                raise EventStreamError(f"eval_stop at event {ev.seq} has no eval_start")
            preds = ev.metadata.get("predictions")
            if not isinstance(preds, str) or not preds:
                raise EventStreamError(f"eval_stop at event {ev.seq} names no predictions file")
            epoch = ev.metadata.get("epoch_num", open_eval.metadata.get("epoch_num"))
            evaluations.append(
                Evaluation(len(evaluations), epoch, open_eval.t, ev.t, preds)
            )
            open_eval = None
    return Timeline(run_start, stops[-1].t if stops else None, evaluations)


@dataclass(frozen=True)
class TTA:
    reached: bool
    crossing: int | None  # index of the first evaluation that met the threshold
    seconds: float | None  # TTA; None when never reached
    excluded_eval_seconds: float | None


def time_to_accuracy(line: Timeline, meets: list[bool]) -> TTA:
    """``meets[i]`` says whether evaluation ``i`` met the threshold (scored by the harness)."""
    if len(meets) != len(line.evaluations):
        raise EventStreamError(
            f"{len(meets)} scores for {len(line.evaluations)} evaluations"
        )
    for i, ok in enumerate(meets):
        if ok:
            excluded = sum(e.seconds for e in line.evaluations[: i + 1])
            return TTA(True, i, line.train_seconds_at(i), excluded)
    return TTA(False, None, None, None)
