"""First crossing and evaluation-time exclusion, on recorded event streams."""

from __future__ import annotations

import pytest

from runner.run.events import Event, parse_line
from runner.score.tta import EventStreamError, time_to_accuracy, timeline


def stream(*spec):
    """Events from (t, key, metadata) triples, in arrival order."""
    return [Event(seq=i, t=t, key=k, metadata=m or {}) for i, (t, k, m) in enumerate(spec)]


def evals(*windows, start=1.0):
    """run_start at ``start``, then one evaluation per (eval_start, eval_stop) window."""
    out = [(start, "run_start", None)]
    for i, (a, b) in enumerate(windows):
        out.append((a, "eval_start", {"epoch_num": i + 1}))
        out.append((b, "eval_stop", {"epoch_num": i + 1, "predictions": f"p/{i}.npy"}))
    out.append((windows[-1][1] + 0.5, "run_stop", {"status": "success"}))
    return stream(*out)


def test_first_crossing_not_best_or_last():
    line = timeline(evals((3, 4), (6, 7), (9, 10)))
    tta = time_to_accuracy(line, [False, True, True])
    assert tta.crossing == 1
    # 7 - 1 = 6 s of wall time, minus two evaluations of 1 s each.
    assert tta.seconds == pytest.approx(4.0)
    assert tta.excluded_eval_seconds == pytest.approx(2.0)


def test_every_evaluation_before_the_crossing_is_excluded():
    line = timeline(evals((2, 2.5), (4, 6), (8, 8.25), start=0.5))
    tta = time_to_accuracy(line, [False, False, True])
    assert tta.seconds == pytest.approx(8.25 - 0.5 - (0.5 + 2 + 0.25))


def test_startup_before_run_start_does_not_count_but_is_visible():
    line = timeline(evals((5, 6), start=4.0))
    assert line.run_start == 4.0
    assert time_to_accuracy(line, [True]).seconds == pytest.approx(1.0)


def test_never_reached():
    tta = time_to_accuracy(timeline(evals((3, 4), (6, 7))), [False, False])
    assert not tta.reached and tta.seconds is None and tta.crossing is None


def test_score_count_must_match_evaluations():
    with pytest.raises(EventStreamError):
        time_to_accuracy(timeline(evals((3, 4))), [True, True])


@pytest.mark.parametrize(
    "events, problem",
    [
        (stream((1, "eval_start", None)), "one run_start"),
        (stream((1, "run_start", None), (2, "run_start", None)), "one run_start"),
        (stream((1, "run_start", None), (2, "eval_stop", {"predictions": "x"})), "no eval_start"),
        (
            stream((1, "run_start", None), (2, "eval_start", None), (3, "eval_start", None)),
            "inside another",
        ),
        (stream((1, "run_start", None), (2, "eval_start", None), (3, "eval_stop", {})),
         "no predictions"),
        (stream((2, "run_start", None), (1, "eval_start", None)), "out of order"),
    ],
)
def test_malformed_streams_are_rejected(events, problem):
    with pytest.raises(EventStreamError, match=problem):
        timeline(events)


def test_reordered_events_are_caught():
    events = evals((3, 4), (6, 7))
    events[2], events[3] = events[3], events[2]
    with pytest.raises(EventStreamError):
        timeline(events)


def test_parse_line_reads_mllog_and_ignores_the_rest():
    ev = parse_line(
        ':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "INTERVAL_END", '
        '"key": "eval_stop", "value": null, "metadata": {"epoch_num": 2, "predictions": "a.npy"}}',
        seq=7, t=1.5,
    )
    assert (ev.key, ev.seq, ev.t, ev.metadata["epoch_num"]) == ("eval_stop", 7, 1.5, 2)
    assert ev.entry_time_ms == 1  # kept, never used for timing
    assert parse_line("epoch 3 loss 0.1", 0, 0.0) is None
    assert parse_line(":::MLLOG {not json", 0, 0.0) is None
    assert parse_line(':::MLLOG {"value": 1}', 0, 0.0) is None
