"""``runner bench overhead``: where the runner's extra time goes is named phase by phase, and
the names add up to the whole difference."""

from __future__ import annotations

import pytest

from runner.bench.overhead import CONTAINER_ROW, FINISHING_ROW, RATIO_TARGET, difference_rows, evaluation_seconds
from runner.timings import Timings


def _timings() -> dict:
    clock = Timings()
    clock.add("preflight", 0.12)
    clock.add("fingerprint", 0.30)
    clock.add("result folder", 0.05)
    clock.add("training", 20.0, {"before_start_seconds": 0.4, "launch_seconds": 0.2, "frozen_seconds": 0.6,
                                 "after_exit_seconds": 1.5, "evaluations": []})
    clock.add("scoring", 0.08)
    return clock.to_dict()


def test_the_rows_add_up_to_the_difference_and_name_each_phase():
    timings = _timings()
    runner_s, plain_s = timings["total_seconds"] + 0.9, 17.0
    rows = difference_rows(timings, runner_s, plain_s)
    assert sum(rows.values()) == pytest.approx(runner_s - plain_s)
    assert rows["fingerprint"] == pytest.approx(0.30)
    assert rows["training: frozen evaluation windows"] == pytest.approx(0.6)
    # the container's own run against the plain run: training less its runner parts less the plain run
    assert rows[CONTAINER_ROW] == pytest.approx(20.0 - 0.4 - 0.6 - 1.5 - 17.0)
    assert rows[FINISHING_ROW] == pytest.approx(0.9)  # after result.json: the bench's stopwatch
    assert list(rows)[:2] == ["preflight", "fingerprint"]  # in the order they ran
    assert "training" not in rows  # split into its parts


def test_the_evaluations_apart_are_their_builders_and_predictions():
    clock = Timings()
    clock.add("preflight", 0.1)
    clock.add("training", 20.0, {"after_exit_seconds": 1.5, "evaluations": [
        {"index": 0, "builder_seconds": 0.02, "predict_seconds": 0.45, "frozen_seconds": 0.001},
        {"index": 1, "builder_seconds": None, "predict_seconds": 0.5}]})
    assert evaluation_seconds(clock.to_dict()) == pytest.approx(0.97)
    assert evaluation_seconds(_timings()) == 0.0 and evaluation_seconds({}) == 0.0


def test_the_target_is_five_percent_and_five_pairs_by_default():
    from runner.bench import BENCHMARKS
    import argparse

    parser = argparse.ArgumentParser()
    BENCHMARKS["overhead"].options(parser)
    assert parser.parse_args([]).pairs == 5
    assert RATIO_TARGET == 1.05
