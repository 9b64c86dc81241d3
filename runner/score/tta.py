"""Time-to-accuracy from the runner's own host-stamped events (DAWNBench's rulings).

The clock starts when the runner's launcher starts the entry's process (the ``launch``
event): interpreter start-up, imports, data loading and model init all count. Each
evaluation is the runner's: it froze the training container (``eval_freeze``), evaluated
the checkpoint itself and thawed it (``eval_thaw``); only frozen time is excluded. On a run
with GPUs the freeze also waits for the run's GPUs to be idle (``runner.run.gpu_freeze``):
the ``eval_freeze`` event is stamped at the pause and carries ``gpu_tail_seconds``, the
busy tail after it, which counts as training: the excluded window starts at the stamp plus
the tail (a stream without the field, from before GPUs were covered, has no tail). TTA runs
to the end of the first evaluation that meets the threshold. Events the entry printed
never move the clock, whatever their keys. The same function serves ``reproduce`` and
``verify``, so an auditor recomputes exactly this.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from runner.events import RUNNER, Event
from runner.errors import RunnerError

LAUNCH, EVAL_FREEZE, EVAL_THAW, CONTAINER_EXIT = "launch", "eval_freeze", "eval_thaw", "container_exit"
# Container start -> launch stamp (judged by ``runner.run.training``): the image's /bin/sh
# runs the launcher, so anything an image does before it (a doctored shell) shows up here.
# Honest launches take ~0.1-0.3 s; past the limit the clock starts at the container's start.
LAUNCH_GAP_LIMIT_S = 2.0


class EventStreamError(RunnerError, ValueError):
    """The events do not form a valid run (order, pairing, or a missing launch stamp)."""

    default_fix = "the run's events are damaged: verify the bundle as it was signed, or reproduce the run again"


@dataclass(frozen=True)
class Evaluation:
    index: int  # 0-based, in the order evaluations happened
    epoch: int | None
    start: float  # host seconds since container start: the freeze
    stop: float  # the thaw
    predictions: str  # the harness' predictions, relative to the result folder
    probe_predictions: str | None = None  # the same model on the perturbed inputs
    checkpoint: str | None = None  # the entry's path, relative to /output
    checkpoint_sha256: str | None = None
    excluded: bool = True  # False when the engine could not freeze the entry
    problem: str | None = None  # why the runner could not evaluate the checkpoint
    builder_seconds: float | None = None  # request -> model built, on the host's clock
    predict_seconds: float | None = None  # model built -> predictions written, on the host's clock
    provenance: str | None = None  # the evaluator's provenance record, relative to the result folder
    gpu_tail_seconds: float = 0.0  # pause -> GPUs idle: inside [paused_at, start), counted as training
    probe_items: int | None = None  # the probe predicted this many items, drawn by probe_seed (None: all)
    probe_seed: int | None = None
    # evidence of training (class 4f): the training containers' CPU seconds and the GPUs' busy
    # seconds up to the freeze, and the evaluator's CPU seconds to predict (None: not recorded)
    cpu_seconds: float | None = None
    gpu_work_seconds: float | None = None
    predict_cpu_seconds: float | None = None

    @property
    def paused_at(self) -> float:
        """When the runner's pause returned (the excluded window starts after the GPU tail)."""
        return self.start - self.gpu_tail_seconds

    @property
    def seconds(self) -> float:
        return self.stop - self.start


@dataclass(frozen=True)
class Timeline:
    clock_start: float  # the launcher's stamp
    run_stop: float | None  # the container's exit
    evaluations: list[Evaluation]

    def excluded_seconds_through(self, index: int) -> float:
        return sum(e.seconds for e in self.evaluations[: index + 1] if e.excluded)

    def train_seconds_at(self, index: int) -> float:
        """Time from the launch to the end of evaluation ``index``, frozen time excluded."""
        return self.evaluations[index].stop - self.clock_start - self.excluded_seconds_through(index)


def _metadata_int(ev: Event, key: str) -> int | None:
    value = ev.metadata.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _metadata_number(ev: Event, key: str) -> float | None:
    value = ev.metadata.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _gpu_tail(freeze: Event) -> float:
    """The busy GPU tail after a pause (0 in streams from before the freeze covered GPUs)."""
    if "gpu_tail_seconds" not in freeze.metadata:
        return 0.0
    tail = _metadata_number(freeze, "gpu_tail_seconds")
    if tail is None or not tail >= 0 or tail == float("inf"):
        raise EventStreamError(f"eval_freeze at event {freeze.seq} has an invalid gpu_tail_seconds")
    return tail


def timeline(events: list[Event]) -> Timeline:
    """Check the stream's order and pair each runner ``eval_freeze`` with its ``eval_thaw``."""
    for prev, cur in pairwise(events):
        if cur.seq <= prev.seq or cur.t < prev.t:
            raise EventStreamError(f"event {cur.seq} ({cur.key}) is out of order")
    ours = [e for e in events if e.origin == RUNNER]
    launches = [e for e in ours if e.key == LAUNCH]
    if len(launches) != 1:
        raise EventStreamError(f"expected one launch stamp by the runner, found {len(launches)}")
    clock_start = launches[0].t
    exits = [e for e in ours if e.key == CONTAINER_EXIT]
    evaluations: list[Evaluation] = []
    frozen: Event | None = None
    for ev in ours:
        if ev.key == EVAL_FREEZE:
            if frozen is not None:
                raise EventStreamError(f"eval_freeze at event {ev.seq} inside another evaluation")
            if ev.t < clock_start:
                raise EventStreamError(f"eval_freeze at event {ev.seq} comes before the launch")
            frozen = ev
        elif ev.key == EVAL_THAW:
            if frozen is None:
                raise EventStreamError(f"eval_thaw at event {ev.seq} has no eval_freeze")
            preds = ev.metadata.get("predictions")
            if not isinstance(preds, str) or not preds:
                raise EventStreamError(f"eval_thaw at event {ev.seq} names no predictions file")
            probe = ev.metadata.get("probe_predictions")
            tail = _gpu_tail(frozen)
            if frozen.t + tail > ev.t:
                raise EventStreamError(f"eval_freeze at event {frozen.seq}: its GPU tail ends after the thaw")
            evaluations.append(
                Evaluation(
                    index=len(evaluations),
                    epoch=_metadata_int(frozen, "epoch"),
                    start=frozen.t + tail,
                    stop=ev.t,
                    predictions=preds,
                    probe_predictions=probe if isinstance(probe, str) else None,
                    checkpoint=frozen.metadata.get("checkpoint"),
                    checkpoint_sha256=ev.metadata.get("checkpoint_sha256"),
                    excluded=frozen.metadata.get("frozen") is True,
                    problem=ev.metadata.get("problem") if isinstance(ev.metadata.get("problem"), str) else None,
                    builder_seconds=_metadata_number(ev, "builder_seconds"),
                    predict_seconds=_metadata_number(ev, "predict_seconds"),
                    provenance=ev.metadata.get("provenance") if isinstance(ev.metadata.get("provenance"), str) else None,
                    probe_items=_metadata_int(ev, "probe_items"),
                    probe_seed=_metadata_int(ev, "probe_seed"),
                    gpu_tail_seconds=tail,
                    cpu_seconds=_metadata_number(frozen, "cpu_seconds"),
                    gpu_work_seconds=_metadata_number(frozen, "gpu_work_seconds"),
                    predict_cpu_seconds=_metadata_number(ev, "predict_cpu_seconds"),
                )
            )
            frozen = None
    if frozen is not None:
        raise EventStreamError(f"eval_freeze at event {frozen.seq} was never thawed")
    return Timeline(clock_start, exits[-1].t if exits else None, evaluations)


@dataclass(frozen=True)
class TTA:
    reached: bool
    crossing: int | None  # index of the first evaluation that met the threshold
    seconds: float | None  # TTA; None when never reached
    excluded_eval_seconds: float | None
    # How finely the entry's evaluations time the crossing: the training time between the
    # crossing evaluation and the one before it (from the clock's start for the first). TTA is
    # only known to within this step, so it is shown beside the figure.
    resolution_seconds: float | None = None


def time_to_accuracy(line: Timeline, meets: list[bool]) -> TTA:
    """``meets[i]`` says whether evaluation ``i`` met the threshold (scored by the harness)."""
    if len(meets) != len(line.evaluations):
        raise EventStreamError(f"{len(meets)} scores for {len(line.evaluations)} evaluations")
    for i, ok in enumerate(meets):
        if ok:
            before = line.train_seconds_at(i - 1) if i else 0.0
            seconds = line.train_seconds_at(i)
            return TTA(True, i, seconds, line.excluded_seconds_through(i), seconds - before)
    return TTA(False, None, None, None)
