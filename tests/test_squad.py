"""SQuAD without Docker: scoring against the official v1.1 evaluation logic on a table of
edge cases, the synthetic set and the import of SQuAD's JSON, the probe, the harness'
span decoding, the host's scoring of timed answers, and the task's declarations."""

from __future__ import annotations

import json
import re
import string
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from runner import data
from runner.errors import UserError
from runner.score.model_origin import chance, sensitivity_limit, timed_disagreement
from runner.score.probe import DISTRACTORS, make_probe_inputs, probe_record
from runner.staging.checks import Expected
from runner.tasks import get_task
from runner.tasks.squad.scoring import exact_match, f1, score_squad

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runner"))
from harness.questions import best_span, decode  # noqa: E402 - the harness' own package name


# -- the official SQuAD v1.1 evaluate script's logic, as published (evaluate-v1.1.py) ----------
def official_normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    return white_space_fix(remove_articles(remove_punc(s.lower())))


def official_f1_score(prediction, ground_truth):
    prediction_tokens = official_normalize_answer(prediction).split()
    ground_truth_tokens = official_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def official_exact_match_score(prediction, ground_truth):
    return official_normalize_answer(prediction) == official_normalize_answer(ground_truth)


def official_max(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, gt) for gt in ground_truths)


# (prediction, ground truths, expected EM, expected F1)
EDGE_CASES = [
    ("Denver Broncos", ["Denver Broncos"], 1.0, 1.0),
    ("denver broncos!", ["Denver Broncos"], 1.0, 1.0),  # case and punctuation
    ("The Denver Broncos", ["Denver Broncos"], 1.0, 1.0),  # a leading article
    ("an apple", ["apple"], 1.0, 1.0),
    ("theater", ["the ater"], 0.0, 0.0),  # "the" inside a word is not an article
    ("  Denver \t\n Broncos ", ["Denver Broncos"], 1.0, 1.0),  # white space
    ("Denver's Broncos", ["Denvers Broncos"], 1.0, 1.0),  # apostrophe is punctuation
    ("1,000", ["1000"], 1.0, 1.0),
    ("Broncos", ["Denver Broncos"], 0.0, 2 / 3),  # partial overlap
    ("the Denver Broncos of Colorado", ["Denver Broncos"], 0.0, 2 * (2 / 4) * 1 / (2 / 4 + 1)),
    ("Carolina Panthers", ["Denver Broncos", "Carolina Panthers", "Panthers"], 1.0, 1.0),  # several truths
    ("Panthers", ["Carolina Panthers", "the Panthers"], 1.0, 1.0),  # best truth wins
    ("Carolina", ["Carolina Panthers", "Panthers"], 0.0, 2 / 3),
    ("", ["Denver Broncos"], 0.0, 0.0),  # empty prediction
    ("", ["the"], 1.0, 0.0),  # a truth that normalises to empty: EM 1, F1 0 (official)
    ("!!!", ["Denver"], 0.0, 0.0),  # a prediction that normalises to empty
    ("a a a", ["a"], 1.0, 0.0),
    ("Santa Clara Santa", ["Santa Clara"], 0.0, 0.8),  # repeated tokens count once each
    ("Élan vital", ["élan VITAL"], 1.0, 1.0),  # non-ASCII lower-casing
    ("1–2", ["1-2"], 0.0, 0.0),  # an en dash is not in string.punctuation
]


@pytest.mark.parametrize(("prediction", "truths", "em", "f1_expected"), EDGE_CASES)
def test_scoring_agrees_with_the_official_v1_1_logic(prediction, truths, em, f1_expected):
    official_em = float(official_max(official_exact_match_score, prediction, truths))
    official_f1 = official_max(official_f1_score, prediction, truths)
    assert (official_em, pytest.approx(official_f1)) == (em, f1_expected)  # the table is the official answer
    assert max(exact_match(prediction, t) for t in truths) == official_em
    assert max(f1(prediction, t) for t in truths) == pytest.approx(official_f1)


def test_whole_set_scores_are_fractions_and_unanswered_questions_score_zero():
    answers = {f"q{i}": truths for i, (_, truths, _, _) in enumerate(EDGE_CASES)}
    predictions = {f"q{i}": p for i, (p, _, _, _) in enumerate(EDGE_CASES)}
    del predictions["q0"]  # unanswered: 0, as the official script counts it
    scores = score_squad(predictions, answers)
    n = len(EDGE_CASES)
    assert scores["exact_match"] == pytest.approx(sum(em for _, _, em, _ in EDGE_CASES[1:]) / n)
    assert scores["f1"] == pytest.approx(sum(x for _, _, _, x in EDGE_CASES[1:]) / n)
    assert 0.0 <= scores["f1"] <= 1.0  # DAWNBench's f1Score is a fraction


# -- data ---------------------------------------------------------------------------------------
def test_synthetic_squad_gives_several_answers_per_question_and_keeps_them_on_the_host(tmp_path):
    staged = data.synthetic("squad-v1.1", tmp_path / "squad", n_train=8, n_eval=6, seed=4)
    examples = [json.loads(x) for x in (staged.eval_dir / "examples.jsonl").read_text().splitlines()]
    answers = staged.load_eval_labels()
    assert "answers" not in (staged.eval_dir / "examples.jsonl").read_text()
    assert not any(p.name == "answers.json" for p in staged.eval_dir.rglob("*"))
    assert all(len(answers[e["id"]]) == 3 for e in examples[1:])
    assert answers[examples[0]["id"]] == ["no such answer"]  # no model scores a perfect 1.0
    for e in examples[1:]:
        assert answers[e["id"]][0] in e["context"] and answers[e["id"]][1] in e["context"]
    train = json.loads((staged.train_dir / "train-v1.1.json").read_text())
    assert all(len(qa["answers"]) == 3 for p in train["data"][0]["paragraphs"] for qa in p["qas"])
    assert data.synthetic("squad-v1.1", tmp_path / "again", n_train=8, n_eval=6, seed=4).digest == staged.digest


def _squad_json(path: Path, qas: list[dict]) -> None:
    context = "The Broncos beat the Panthers in Santa Clara."
    path.write_text(json.dumps({"version": "1.1", "data": [
        {"title": "Super_Bowl", "paragraphs": [{"context": context, "qas": qas}]}]}))


def test_squad_import_keeps_every_answer_and_a_malformed_question_loses_nothing_staged(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    dev = tmp_path / "in" / "dev-v1.1.json"
    dev.parent.mkdir()
    good = [{"id": "a1", "question": "Who won?", "answers": [
        {"answer_start": 4, "text": "Broncos"}, {"answer_start": 0, "text": "The Broncos"},
        {"answer_start": 4, "text": "Broncos"}]},
        {"id": "a2", "question": "Where?", "answers": [{"answer_start": 33, "text": "Santa Clara"}]}]
    _squad_json(dev, good)
    staged = data.import_dataset("squad-v1.1", dev, expected=Expected(official=False))
    assert staged.load_eval_labels() == {"a1": ["Broncos", "The Broncos", "Broncos"], "a2": ["Santa Clara"]}
    before = {p.relative_to(staged.root): p.read_bytes() for p in staged.root.rglob("*") if p.is_file()}

    _squad_json(dev, [good[0], {"id": "a2", "answers": [{"answer_start": 0, "text": "x"}]}])
    with pytest.raises(UserError) as err:
        data.import_dataset("squad-v1.1", dev, expected=Expected(official=False))
    message = str(err.value)
    assert "\n" not in message and "question 1 (id 'a2') has no 'question' text" in message
    assert "download the official SQuAD v1.1 files again" in (err.value.fix or "")
    after = {p.relative_to(staged.root): p.read_bytes() for p in staged.root.rglob("*") if p.is_file()}
    assert after == before  # what was staged is still there, unchanged

    _squad_json(dev, [{"id": "a3", "question": "Who?", "answers": []}])
    with pytest.raises(UserError, match="has no 'answers'"):
        data.import_dataset("squad-v1.1", dev, expected=Expected(official=False))


# -- the probe, the harness' decoding, the host's checks ---------------------------------------
def test_question_probe_appends_one_unrelated_sentence_and_keeps_answer_offsets(tmp_path):
    staged = data.synthetic("squad-v1.1", tmp_path / "squad", n_train=2, n_eval=4, seed=1)
    probe = make_probe_inputs(staged.eval_dir, tmp_path / "probe", seed=9)
    clean = [json.loads(x) for x in (staged.eval_dir / "examples.jsonl").read_text().splitlines()]
    moved = [json.loads(x) for x in (probe / "examples.jsonl").read_text().splitlines()]
    sentence = probe_record(get_task("squad-v1.1"), 9)["distractor_sentence"]
    assert sentence in DISTRACTORS
    for c, m in zip(clean, moved):
        assert m["context"] == f"{c['context']} {sentence}" and m["question"] == c["question"]


def test_best_span_respects_order_length_and_context_tokens():
    offsets = np.array([[0, 3], [4, 9], [10, 12], [-1, -1]])
    start = np.array([0.0, 5.0, 1.0, 99.0])
    end = np.array([2.0, 0.0, 4.0, 99.0])  # end before start and padding must not win
    assert best_span(offsets, start, end, max_tokens=15) == (4, 12)
    assert best_span(offsets, start, end, max_tokens=1) == (4, 9)
    assert best_span(np.full((2, 2), -1), start[:2], end[:2], 15) is None
    text = "The Broncos won"
    got = decode([text], np.array([[[0, 3], [4, 11], [12, 15]]]), np.array([[0.0, 3.0, 1.0]]),
                 np.array([[0.0, 2.0, 1.0]]), 15)
    assert got == ["Broncos"]


def test_sensitivity_and_timed_model_rules_for_questions():
    task = get_task("squad-v1.1")
    assert chance(task, {"q": ["x"]}) == 0.10
    assert sensitivity_limit(task, {"q": ["x"]}, 0.9) == pytest.approx(0.5)
    assert timed_disagreement({"a": "x", "b": "y"}, {"a": "x", "b": "z"}) == 0.5
    assert timed_disagreement({"a": "x"}, {"b": "x"}) is None


def test_evaluate_backend_scores_timed_answers_against_the_host_answers(tmp_path):
    from runner.inference.measure import evaluate_backend

    task = get_task("squad-v1.1")
    labels = {"a": ["Denver Broncos"], "b": ["Panthers", "Carolina Panthers"]}
    folder = tmp_path / "torch"
    folder.mkdir()
    (folder / "info.json").write_text(json.dumps({"backend": "torch", "warmup": {"count": 1}}))
    (folder / "predictions.json").write_text(json.dumps({"a": "the Denver Broncos", "b": "Charlotte"}))
    np.save(folder / "latencies_ns.npy", np.array([1_000_000, 3_000_000], dtype=np.int64))
    record = evaluate_backend("torch", folder, task, labels, 1.0, 3.0, expected_count=2)
    assert record["scores"] == {"f1": 0.5, "exact_match": 0.5}
    assert not record["passed_gate"] and "misses the threshold 0.75" in record["gate_reason"]
    (folder / "predictions.json").write_text(json.dumps({"a": "Denver Broncos", "b": "Panthers"}))
    record = evaluate_backend("torch", folder, task, labels, 1.0, 3.0, expected_count=2)
    assert record["passed_gate"] and record["latency_ms"]["mean"] == 2.0


def test_task_declarations():
    squad = get_task("squad-v1.1")
    assert (squad.inputs, squad.dawnbench, squad.chance_score) == ("questions", "SQuAD", 0.10)
    assert {p.name for p in squad.public_inputs} == {"glove.840B.300d", "glove.6B"}
    assert "appended to every context" in squad.probe
    for name in ("mnist", "fashion-mnist", "cifar10", "imagenet"):
        task = get_task(name)
        assert task.inputs == "images" and task.public_inputs == () and "one pixel" in task.probe
