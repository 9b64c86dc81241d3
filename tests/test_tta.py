"""The runner's clock on recorded event streams: the launch stamp starts it, only the
runner's frozen evaluation windows are excluded, the first crossing ends it, and nothing
the entry prints moves it."""

from __future__ import annotations

import pytest

from runner.events import Event, parse_line, runner_event
from runner.score.tta import EventStreamError, time_to_accuracy, timeline


def stream(*spec):
    """Runner events from (t, key, metadata) triples, in arrival order."""
    return [runner_event(i, t, k, **(m or {})) for i, (t, k, m) in enumerate(spec)]


def evals(*windows, launch=1.0, frozen=True):
    """The launch at ``launch``, then one frozen evaluation per (freeze, thaw) window."""
    out = [(launch, "launch", {"stamp": "launcher"})]
    for i, (a, b) in enumerate(windows):
        out.append((a, "eval_freeze", {"index": i, "epoch": i + 1, "frozen": frozen, "checkpoint": f"c/{i}.pt"}))
        out.append((b, "eval_thaw", {"index": i, "predictions": f"evaluations/{i}/clean.npy", "checkpoint_sha256": "0" * 64}))
    out.append((windows[-1][1] + 0.5, "container_exit", {"exit_code": 0}))
    return stream(*out)


def entry_line(seq, t, key, **metadata):
    return Event(seq=seq, t=t, key=key, metadata=metadata)


def test_first_crossing_not_best_or_last():
    line = timeline(evals((3, 4), (6, 7), (9, 10)))
    tta = time_to_accuracy(line, [False, True, True])
    assert tta.crossing == 1
    # 7 - 1 = 6 s of wall time, minus two frozen evaluations of 1 s each.
    assert tta.seconds == pytest.approx(4.0)
    assert tta.excluded_eval_seconds == pytest.approx(2.0)


def test_every_frozen_evaluation_before_the_crossing_is_excluded():
    line = timeline(evals((2, 2.5), (4, 6), (8, 8.25), launch=0.5))
    tta = time_to_accuracy(line, [False, False, True])
    assert tta.seconds == pytest.approx(8.25 - 0.5 - (0.5 + 2 + 0.25))


def test_the_clock_starts_at_the_launch_not_at_the_entrys_run_start():
    """Class 1: an entry that works before printing run_start gains nothing."""
    events = evals((5, 6), launch=0.2)
    events.insert(1, entry_line(99, 4.0, "run_start"))
    events = [Event(**{**e.__dict__, "seq": i}) for i, e in enumerate(sorted(events, key=lambda e: e.t))]
    line = timeline(events)
    assert line.clock_start == 0.2
    assert time_to_accuracy(line, [True]).seconds == pytest.approx(5.0 - 0.2)


def test_evaluation_windows_the_entry_declares_are_not_excluded():
    """Class 2: the entry's own eval_start/eval_stop pair excludes nothing."""
    events = stream((0.1, "launch", {"stamp": "launcher"}))
    events += [entry_line(1, 1.0, "eval_start"), entry_line(2, 9.0, "eval_stop", predictions="x.npy")]
    events += [runner_event(3, 10.0, "eval_freeze", index=0, frozen=True),
               runner_event(4, 10.5, "eval_thaw", index=0, predictions="evaluations/0/clean.npy")]
    line = timeline(events)
    assert len(line.evaluations) == 1
    assert time_to_accuracy(line, [True]).seconds == pytest.approx(10.5 - 0.1 - 0.5)


def test_entry_lines_with_runner_keys_are_not_the_runners():
    """Class 7: printing the runner's own keys forges nothing."""
    events = stream((0.1, "launch", {"stamp": "launcher"}))
    events += [entry_line(1, 0.5, "launch"), entry_line(2, 1.0, "eval_freeze", frozen=True),
               entry_line(3, 8.0, "eval_thaw", predictions="evaluations/0/clean.npy")]
    events += [runner_event(4, 9.0, "eval_freeze", index=0, frozen=True),
               runner_event(5, 9.5, "eval_thaw", index=0, predictions="evaluations/0/clean.npy")]
    line = timeline(events)
    assert line.clock_start == 0.1 and len(line.evaluations) == 1
    assert time_to_accuracy(line, [True]).excluded_eval_seconds == pytest.approx(0.5)


def test_an_unfrozen_evaluation_counts_toward_tta():
    line = timeline(evals((3, 4), frozen=False))
    tta = time_to_accuracy(line, [True])
    assert tta.seconds == pytest.approx(3.0) and tta.excluded_eval_seconds == 0


def test_never_reached():
    tta = time_to_accuracy(timeline(evals((3, 4), (6, 7))), [False, False])
    assert not tta.reached and tta.seconds is None and tta.crossing is None


def test_score_count_must_match_evaluations():
    with pytest.raises(EventStreamError):
        time_to_accuracy(timeline(evals((3, 4))), [True, True])


@pytest.mark.parametrize(
    "spec, problem",
    [
        ([(1, "eval_freeze", None)], "one launch"),
        ([(1, "launch", None), (2, "launch", None)], "one launch"),
        ([(1, "launch", None), (2, "eval_thaw", {"predictions": "x"})], "no eval_freeze"),
        ([(1, "launch", None), (2, "eval_freeze", None), (3, "eval_freeze", None)], "inside another"),
        ([(1, "launch", None), (2, "eval_freeze", None), (3, "eval_thaw", {})], "no predictions"),
        ([(1, "launch", None), (2, "eval_freeze", None)], "never thawed"),
        ([(2, "launch", None), (1, "eval_freeze", None)], "out of order"),
    ],
)
def test_malformed_streams_are_rejected(spec, problem):
    with pytest.raises(EventStreamError, match=problem):
        timeline(stream(*spec))


def test_reordered_events_are_caught():
    events = evals((3, 4), (6, 7))
    events[2], events[3] = events[3], events[2]
    with pytest.raises(EventStreamError):
        timeline(events)


def test_parse_line_reads_mllog_as_the_entrys_and_ignores_the_rest():
    ev = parse_line(
        ':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", '
        '"key": "eval_request", "value": null, "metadata": {"epoch_num": 2, "checkpoint": "a.pt"}}',
        seq=7, t=1.5,
    )
    assert (ev.key, ev.seq, ev.t, ev.metadata["epoch_num"]) == ("eval_request", 7, 1.5, 2)
    assert ev.origin == "entry"
    assert ev.entry_time_ms == 1  # kept, never used for timing
    assert parse_line(':::MLLOG {"key": "launch", "origin": "runner"}', 0, 0.0).origin == "entry"
    assert parse_line("epoch 3 loss 0.1", 0, 0.0) is None
    assert parse_line(":::MLLOG {not json", 0, 0.0) is None
    assert parse_line(':::MLLOG {"value": 1}', 0, 0.0) is None
