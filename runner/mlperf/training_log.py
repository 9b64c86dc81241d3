"""An MLPerf training log rendered from the runner's own host-stamped records.

``render_training_log(run)`` is pure: the same ``MlperfRun`` always gives the same text.
Every time is the host's: ``wall_clock_start_unix_ms`` is when the host started the run's
clock, and each ``*_t`` is seconds after it on the host's monotonic clock, so
``time_ms = wall_clock_start_unix_ms + 1000 * t``. Accuracies are the harness' own scores
as fractions. Nothing the entry printed is copied into this log.

The keys and their order follow the ``mlperf-logging`` training ruleset (4.0.0:
``compliance_checker/training_4.0.0/common.yaml``, ``open_common.yaml``,
``open_<benchmark>.yaml``): the submission keys and ``cache_clear`` first, then
``init_start < init_stop < run_start``, epochs with their evaluations, and ``run_stop``
with its status.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from runner.mlperf.config import SubmissionConfig
from runner.tasks import TASKS

# The 4.0.0 training benchmarks a log may name (open_common.yaml's submission_benchmark).
TRAINING_BENCHMARKS_400 = (
    "resnet", "ssd", "stable_diffusion", "maskrcnn", "gpt3", "dlrm_dcnv2", "bert", "rnnt", "unet3d", "gnn",
)
# Which MLPerf benchmark a runner task is closest to (its ``mlperf_training``); open division
# only (different model/data).
TASK_BENCHMARK = {t.id: t.mlperf_training for t in TASKS.values() if t.mlperf_training}
STATUSES = ("success", "aborted")
NAMESPACE = ""


@dataclass(frozen=True)
class Epoch:
    epoch_num: int
    start_t: float
    stop_t: float


@dataclass(frozen=True)
class Evaluation:
    epoch_num: int
    t: float  # when the host's score was known (eval_stop, eval_accuracy)
    accuracy_fraction: float
    start_t: float | None = None  # when the evaluation began; defaults to ``t``


@dataclass(frozen=True)
class MlperfRun:
    benchmark: str  # a ruleset benchmark name, e.g. "resnet" for image classification
    submission: SubmissionConfig
    wall_clock_start_unix_ms: int
    init_start_t: float
    init_stop_t: float
    run_start_t: float
    epochs: list[Epoch]
    evaluations: list[Evaluation]
    run_stop_t: float
    status: str  # "success" | "aborted"
    seed: int
    global_batch_size: int | None
    train_samples: int
    eval_samples: int
    extra: dict = field(default_factory=dict)  # written as POINT_IN_TIME keys at init (runner_*)


def _as_epochs(items) -> list[Epoch]:
    return [e if isinstance(e, Epoch) else Epoch(*e) for e in items]


def _as_evaluations(items) -> list[Evaluation]:
    return [e if isinstance(e, Evaluation) else Evaluation(*e) for e in items]


def validate(run: MlperfRun) -> None:
    """Refuse a run the ruleset would refuse, with the reason (the caller's bug, not the user's)."""
    if run.benchmark not in TRAINING_BENCHMARKS_400:
        raise ValueError(f"benchmark {run.benchmark!r} is not one of {', '.join(TRAINING_BENCHMARKS_400)}")
    if run.status not in STATUSES:
        raise ValueError(f"status must be success or aborted, not {run.status!r}")
    if not run.init_start_t <= run.init_stop_t <= run.run_start_t <= run.run_stop_t:
        raise ValueError("times must satisfy init_start <= init_stop <= run_start <= run_stop")
    if not run.evaluations:
        raise ValueError("an MLPerf training log needs at least one evaluation (eval_accuracy)")
    for ev in _as_evaluations(run.evaluations):
        if not 0.0 <= ev.accuracy_fraction <= 1.0:
            raise ValueError(f"accuracy {ev.accuracy_fraction} of epoch {ev.epoch_num} is not a fraction")


def _line(time_ms: int, event_type: str, key: str, value=None, **metadata) -> str:
    record = {"namespace": NAMESPACE, "time_ms": time_ms, "event_type": event_type,
              "key": key, "value": value, "metadata": metadata}
    return ":::MLLOG " + json.dumps(record)


SUBMISSION_KEYS = ("org", "platform", "division", "status")  # from the user's config


def missing_submission_keys(submission: SubmissionConfig) -> list[str]:
    """The config's submission keys a log leaves out (MLPerf's checker needs every one)."""
    return [key for key in SUBMISSION_KEYS if submission.get(key) is None]


def render_training_log(run: MlperfRun) -> str:
    """The ``:::MLLOG`` lines of one run, in the ruleset's order, newline-terminated."""
    validate(run)
    sub = run.submission

    def ms(t: float) -> int:
        return int(round(run.wall_clock_start_unix_ms + t * 1000.0))

    point, start, end = "POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END"
    t0 = ms(run.init_start_t)
    # Set-up, in the ruleset's order: submission keys (division first: it selects the
    # open/closed rules), cache_clear, init_start, the run's constants, init_stop, run_start.
    # A submission key not set is left out, never guessed (``missing_submission_keys``).
    submission = {"division": sub.get("division"), "benchmark": run.benchmark, "org": sub.get("org"),
                  "platform": sub.get("platform"), "status": sub.get("status")}
    head = [
        *(_line(t0, point, f"submission_{key}", value) for key, value in submission.items() if value),
        _line(t0, point, "cache_clear", True),
        _line(t0, start, "init_start"),
        _line(t0, point, "seed", run.seed),
    ]
    if run.global_batch_size is not None:
        head.append(_line(t0, point, "global_batch_size", run.global_batch_size))
    head += [
        _line(t0, point, "train_samples", run.train_samples),
        _line(t0, point, "eval_samples", run.eval_samples),
        *(_line(t0, point, f"runner_{key}", value) for key, value in sorted(run.extra.items())),
        _line(ms(run.init_stop_t), end, "init_stop"),
        _line(ms(run.run_start_t), start, "run_start"),
    ]
    # The timed part: each epoch then its evaluations, stably sorted by time so equal
    # stamps keep that order (epoch_stop, eval_start, eval_stop, eval_accuracy, next epoch).
    evaluations = _as_evaluations(run.evaluations)
    body: list[tuple[int, str]] = []

    def add_evaluation(ev: Evaluation) -> None:
        begun, done = ms(ev.t if ev.start_t is None else ev.start_t), ms(ev.t)
        body.append((begun, _line(begun, start, "eval_start", epoch_num=ev.epoch_num)))
        body.append((done, _line(done, end, "eval_stop", epoch_num=ev.epoch_num)))
        body.append((done, _line(done, point, "eval_accuracy", ev.accuracy_fraction, epoch_num=ev.epoch_num)))

    epochs = _as_epochs(run.epochs)
    for epoch in epochs:
        body.append((ms(epoch.start_t), _line(ms(epoch.start_t), start, "epoch_start", epoch_num=epoch.epoch_num)))
        body.append((ms(epoch.stop_t), _line(ms(epoch.stop_t), end, "epoch_stop", epoch_num=epoch.epoch_num)))
        for ev in evaluations:
            if ev.epoch_num == epoch.epoch_num:
                add_evaluation(ev)
    known = {epoch.epoch_num for epoch in epochs}
    for ev in evaluations:
        if ev.epoch_num not in known:
            add_evaluation(ev)
    body.sort(key=lambda item: item[0])
    tail = [_line(ms(run.run_stop_t), end, "run_stop", status=run.status)]
    return "".join(line + "\n" for line in [*head, *(line for _, line in body), *tail])
