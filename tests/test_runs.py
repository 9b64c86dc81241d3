import pytest

from runner.results import summarize_runs


def test_median_and_cv_over_runs_that_reached():
    s = summarize_runs([10.0, 12.0, None, 11.0])
    assert (s.runs, s.reached, s.median) == (4, 3, 11.0)
    assert s.cv == pytest.approx(1.0 / 11.0)


def test_single_run_has_no_cv_and_none_reached_has_no_median():
    assert summarize_runs([5.0]).cv is None
    assert summarize_runs([None, None]).median is None
