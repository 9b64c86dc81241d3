"""The leaderboard's plots show the data: the accuracy axis zoomed to the points of the runs
that count and the threshold, the time and latency axes fitted to those runs (a run that does
not count never stretches them, it is cut and marked at the edge), and the legend outside the
axes. Checked on the figures' geometry (limits, texts, window extents), not on pixels."""

from __future__ import annotations

import numpy as np
import pytest

from runner.dawnbench.claims import CurvePoint
from runner.dawnbench.tasks import format_task
from runner.leaderboard import plots
from runner.plotting import pyplot

MNIST = format_task("mnist")  # top1Accuracy in percent, threshold 99.3
SQUAD = format_task("squad-v1.1")  # f1Score as a fraction, threshold 0.75


def curve(*points: tuple[float, float], field: str = "top1Accuracy") -> list[CurvePoint]:
    """(seconds, accuracy) pairs as a run's curve."""
    return [CurvePoint(i + 1, s / 3600, {field: a}) for i, (s, a) in enumerate(points)]


COUNTED = [
    plots.RunCurve("s0-aaaaaa", curve((5.6, 99.12), (10.1, 99.34), (14.9, 99.39)), True),
    plots.RunCurve("s2-eeeeee", curve((6.6, 99.17), (12.3, 99.31), (18.2, 99.42)), True),
    plots.RunCurve("s3-ffffff", curve((5.0, 99.10), (8.8, 99.26), (12.9, 99.36)), True),
]
TIMED_OUT = plots.RunCurve("s4-dddddd", curve((190, 98.60), (390, 99.05), (612, 99.31)), False)


@pytest.fixture
def figures():
    made = []
    yield made
    for fig in made:
        pyplot().close(fig)


def drawn(figures, fig):
    figures.append(fig)
    fig.canvas.draw()
    return fig.axes[0]


def scores(runs, field="top1Accuracy"):
    return [p.scores[field] for r in runs for p in r.points]


def legend_is_outside(ax) -> bool:
    """The legend's box lies wholly right of or below the axes' data area (no overlap)."""
    legend, data = ax.get_legend().get_window_extent(), ax.get_window_extent()
    return legend.x0 >= data.x1 or legend.y1 <= data.y0


def test_the_accuracy_axis_is_zoomed_to_the_counted_points_and_the_threshold(figures):
    other_host = plots.RunCurve("s5-cccccc", curve((6.0, 98.70), (11.0, 99.33)), False)
    ax = drawn(figures, plots.curve_figure(MNIST, COUNTED + [TIMED_OUT, other_host]))
    low, high = ax.get_ylim()
    values = scores(COUNTED) + [MNIST.threshold]
    assert low <= min(values) and high >= max(values)  # every counted point and the threshold in view
    assert 98.9 <= low < 99.1 and 99.42 < high <= 99.6  # a small margin, not 0..100
    assert (high - low) < 1.0
    # The other host's 98.70 % evaluation lies below the axis: marked on its lower edge, at its time.
    below = [line for line in ax.lines if line.get_marker() == "v"]
    assert len(below) == 1 and below[0].get_xydata().tolist() == [[6.0, low]] and below[0].get_clip_on() is False


@pytest.mark.parametrize("points", [[(10.0, 99.3)], [(4.0, 99.35), (8.0, 99.35), (12.0, 99.35)]])
def test_one_point_or_equal_points_still_get_an_axis_around_them(figures, points):
    run = plots.RunCurve("s0", curve(*points), True)
    ax = drawn(figures, plots.curve_figure(MNIST, [run]))
    low, high = ax.get_ylim()
    assert low < min(scores([run]) + [MNIST.threshold]) and high > max(scores([run]))
    assert 0.2 - 1e-9 <= high - low < 0.5  # 0.1 point either side at least
    left, right = ax.get_xlim()
    assert left == 0 and right > max(s for s, _ in points)


def test_a_run_without_points_is_listed_and_draws_nothing(figures):
    ax = drawn(figures, plots.curve_figure(MNIST, COUNTED + [plots.RunCurve("s9-empty", [], False)]))
    assert "s9-empty (does not count)" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert ax.get_xlim()[1] < 25 and len(ax.texts) == 0


def test_a_fraction_metric_and_a_point_at_the_top_stay_sensible(figures):
    run = plots.RunCurve("s0", curve((100, 0.70), (200, 0.76), (300, 1.0), field="f1Score"), True)
    ax = drawn(figures, plots.curve_figure(SQUAD, [run]))
    low, high = ax.get_ylim()
    assert 0.6 < low < 0.70 and 1.0 < high < 1.05


def test_a_run_that_does_not_count_never_stretches_the_time_axis(figures):
    ax = drawn(figures, plots.curve_figure(MNIST, COUNTED + [TIMED_OUT]))
    left, right = ax.get_xlim()
    assert left == 0 and 18.2 < right < 25  # seconds: the counted runs' last evaluation at 18.2 s, not 612 s
    assert ax.get_xlabel().startswith("training time (seconds")
    # It is still drawn (dashed, faded) and marked on the right edge with where its curve ends.
    (line,) = [ln for ln in ax.lines if ln.get_label() == "s4-dddddd (does not count)"]
    assert line.get_linestyle() == "--" and line.get_alpha() < 1
    assert [t.get_text() for t in ax.texts] == ["to 612 s"]
    edge = [ln for ln in ax.lines if ln.get_marker() == ">"]
    assert len(edge) == 1 and edge[0].get_clip_on() is False


def test_the_claimed_curve_is_cut_and_marked_like_a_run_that_does_not_count(figures):
    claimed = curve((30, 99.0), (60, 99.35))
    ax = drawn(figures, plots.curve_figure(MNIST, COUNTED, claimed))
    assert ax.get_xlim()[1] < 25 and [t.get_text() for t in ax.texts] == ["to 60 s"]


def test_when_no_run_counts_the_axes_span_every_run(figures):
    runs = [plots.RunCurve(r.label, r.points, False) for r in COUNTED] + [TIMED_OUT]
    ax = drawn(figures, plots.curve_figure(MNIST, runs))
    left, right = ax.get_xlim()
    assert right > 612 / 60 and ax.get_xlabel().startswith("training time (minutes")
    assert ax.get_ylim()[0] <= 98.60 and len(ax.texts) == 0


def test_the_curves_legend_is_outside_the_axes_and_inside_the_png(figures, tmp_path):
    ax = drawn(figures, plots.curve_figure(MNIST, COUNTED + [TIMED_OUT], curve((4.0, 99.1), (9.0, 99.35))))
    assert legend_is_outside(ax)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["claimed", "s0-aaaaaa", "s2-eeeeee", "s3-ffffff", "s4-dddddd (does not count)",
                      "threshold 99.3"]
    # Saved with bbox_inches="tight": the PNG is wider than the figure, the legend kept whole.
    png = plots.runs_curve(tmp_path / "curve.png", MNIST, COUNTED + [TIMED_OUT])
    width, height = pyplot().imread(png).shape[1::-1]
    assert width > plots.SIZE[0] * plots.DPI * 1.1 and height < plots.SIZE[1] * plots.DPI * 1.05


def latencies(median_ms: float, seed: int, n: int = 10_000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    ms = median_ms * rng.lognormal(0.0, 0.06, n)
    ms[rng.random(n) < 0.003] *= 2.5
    return ms


def test_latency_axis_fits_the_counted_runs_and_marks_the_slower_one(figures):
    runs = [plots.RunLatencies("s0", latencies(0.21, 0)), plots.RunLatencies("s2", latencies(0.22, 2)),
            plots.RunLatencies("s5 slow host", latencies(1.4, 5), counts=False)]
    ax = drawn(figures, plots.latency_figure("torch", runs))
    low, high = ax.get_xlim()
    counted = np.concatenate([runs[0].ms, runs[1].ms])
    assert low <= np.percentile(counted, 0.5) and np.percentile(counted, 99.5) <= high < 0.5  # not out to 1.4 ms
    assert low > 0.1  # zoomed to the items, not from zero
    assert legend_is_outside(ax)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[2].startswith("s5 slow host (does not count)\nmean 1.4")
    assert "items off the axis" in labels[2] and "off the axis" not in labels[0] + labels[1]
    assert len([ln for ln in ax.lines if ln.get_marker() == ">"]) == 1
    # Its items off the axis are left out, never piled into the last bin (no spike stretching the count axis).
    assert ax.get_ylim()[1] < 1000


def test_latency_axis_starts_at_zero_when_zero_is_near(figures):
    ax = drawn(figures, plots.latency_figure("onnx", [plots.RunLatencies("s0", np.linspace(0.01, 0.4, 500))]))
    assert ax.get_xlim()[0] == 0 and legend_is_outside(ax)
