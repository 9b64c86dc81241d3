"""The result's ``timings`` section: phases in order, the training phase split by the runner's
own events, and results written before the section still read."""

from __future__ import annotations

import json

import jsonschema
import pytest

from runner.events import Event, runner_event
from runner.results import RESULT_SCHEMA
from runner.results.record import Result
from runner.timings import Timings, render_timings, training_parts
from tests.synthetic_result import make_result_folder, stage_mnist_stand_in


def _events() -> list[Event]:
    return [
        runner_event(0, 0.2, "launch", stamp="launcher"),
        Event(seq=1, t=1.0, key="run_start"),
        runner_event(2, 3.0, "eval_freeze", index=0),
        runner_event(3, 4.5, "eval_thaw", index=0, builder_seconds=0.25, predict_seconds=1.0),
        runner_event(4, 6.0, "eval_freeze", index=1),
        runner_event(5, 6.5, "eval_thaw", index=1, builder_seconds=None, predict_seconds=0.4),
        runner_event(6, 8.0, "container_exit", exit_code=0),
    ]


def test_the_training_phase_is_split_by_the_runners_events():
    parts = training_parts(_events(), phase_seconds=9.0)
    assert parts["launch_seconds"] == 0.2
    assert parts["frozen_seconds"] == pytest.approx(2.0)
    # exit at 8.0 s, less the launch and the two frozen windows
    assert parts["entry_running_seconds"] == pytest.approx(5.8)
    assert parts["after_exit_seconds"] == pytest.approx(1.0)
    assert parts["evaluations"] == [
        {"index": 0, "frozen_seconds": 1.5, "builder_seconds": 0.25, "predict_seconds": 1.0},
        {"index": 1, "frozen_seconds": 0.5, "predict_seconds": 0.4},
    ]


def test_an_entrys_lines_named_like_the_runners_events_do_not_count():
    forged = [*_events(), Event(seq=7, t=7.0, key="eval_freeze", metadata={"index": 2}),
              Event(seq=8, t=7.9, key="eval_thaw", metadata={"index": 2})]
    assert [e["index"] for e in training_parts(forged, 9.0)["evaluations"]] == [0, 1]


def test_phases_keep_their_order_and_sum_to_the_total():
    clock = Timings()
    with clock.phase("preflight"):
        pass
    clock.add("training", 12.5, {"launch_seconds": 0.2})
    data = clock.to_dict()
    assert [p["name"] for p in data["phases"]] == ["preflight", "training"]
    assert data["total_seconds"] == pytest.approx(12.5, abs=0.01)
    rendered = render_timings(data)
    assert rendered.row_count == 4  # two phases, one part, the total


def test_a_result_with_timings_round_trips_and_one_without_still_reads(tmp_path):
    from runner.fingerprint import capture_host

    staged = stage_mnist_stand_in(tmp_path / "home")
    folder = make_result_folder(tmp_path / "20261122T010203Z-s0-abc123", staged, capture_host(None))
    old = Result.read(folder)
    assert "timings" not in old.to_dict()  # results written before the section read as written
    old.timings = {"phases": [{"name": "training", "seconds": 3.0}], "total_seconds": 3.0}
    data = old.to_dict()
    jsonschema.Draft202012Validator(RESULT_SCHEMA).validate(data)
    assert Result.from_dict(json.loads(json.dumps(data))).timings == old.timings
