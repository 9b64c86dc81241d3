from __future__ import annotations

import numpy as np
import pytest

from runner.errors import UserError
from runner.tasks import TASKS, get_task
from runner.tasks.metrics import score_classification, topk_accuracy
from runner.tasks.squad.scoring import exact_match, f1, normalize_answer, score_squad


def test_registry_thresholds_and_sizes():
    expected = {
        "mnist": ("top1", 0.993, 10_000),
        "fashion-mnist": ("top1", 0.92, 10_000),
        "cifar10": ("top1", 0.94, 10_000),
        "imagenet": ("top5", 0.93, 50_000),
        "squad-v1.1": ("f1", 0.75, 10_570),
    }
    assert {k: (t.metric, t.threshold, t.eval_size) for k, t in TASKS.items()} == expected


def test_threshold_is_inclusive():
    mnist = get_task("mnist")
    assert mnist.meets(9930 / 10000)
    assert not mnist.meets(9929 / 10000)


def test_unknown_task_names_the_choices():
    with pytest.raises(UserError, match="mnist"):
        get_task("mnits")


def test_topk():
    labels = np.array([0, 1, 2, 3])
    ranked = np.array([[0, 9, 8, 7, 6], [9, 1, 8, 7, 6], [9, 8, 7, 6, 5], [3, 0, 0, 0, 0]])
    assert topk_accuracy(ranked, labels, 1) == 0.5
    assert topk_accuracy(ranked, labels, 5) == 0.75
    assert topk_accuracy(np.array([0, 1, 0, 0]), labels, 1) == 0.5
    with pytest.raises(UserError):
        topk_accuracy(np.array([0, 1, 0, 0]), labels, 5)


def test_imagenet_reports_top1_and_top5():
    scores = score_classification(get_task("imagenet"), np.array([[1, 2, 3, 4, 5]]), np.array([4]))
    assert scores == {"top1": 0.0, "top5": 1.0}


def test_squad_normalisation_and_max_over_truths():
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert exact_match("the Eiffel Tower", "Eiffel Tower") == 1.0
    assert f1("Eiffel Tower in Paris", "the Eiffel Tower") == pytest.approx(2 * 0.5 * 1 / 1.5)
    scores = score_squad(
        {"q1": "Paris", "q2": "blue"},
        {"q1": ["London", "paris"], "q2": ["red"], "q3": ["x"]},
    )
    assert scores["exact_match"] == pytest.approx(1 / 3)
    assert scores["f1"] == pytest.approx(1 / 3)
