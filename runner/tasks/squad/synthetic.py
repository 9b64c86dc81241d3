"""SQuAD's synthetic stand-in for smoke runs: articles in the official v1.1 layout whose
answers are spans of their contexts, staged as the importer stages the real files (training
JSON, evaluation questions without answers, the answers on the host)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from runner.staging.stage import Stage

_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORDS = (
    "river stone castle garden winter lantern harbor violet engine meadow falcon copper "
    "signal orchard canyon marble ribbon glacier timber beacon"
).split()


def articles(rng: np.random.Generator, n_questions: int, prefix: str) -> list[dict]:
    """SQuAD-format articles whose answers are spans of their contexts, three ground truths
    a question as in the official dev set (a two-word span, its first word, the span again
    with a leading article). The question names the word before the answer, which occurs
    once in its context, so a small span model learns the task."""
    paragraphs = []
    for i in range(n_questions):
        words = [str(w) for w in rng.choice(_WORDS, size=int(rng.integers(12, 30)))]
        start = int(rng.integers(1, len(words) - 2))
        cue = words[start - 1]
        # the cue word occurs only before the answer: elsewhere it is replaced
        words = [w if j == start - 1 or w != cue else _WORDS[(_WORDS.index(w) + 1) % len(_WORDS)]
                 for j, w in enumerate(words)]
        if words[start] == cue:
            words[start] = _WORDS[(_WORDS.index(cue) + 1) % len(_WORDS)]
        context = " ".join(words)
        offset = len(" ".join(words[:start])) + 1
        two = " ".join(words[start:start + 2])
        answers = [{"answer_start": offset, "text": two},
                   {"answer_start": offset, "text": words[start]},
                   {"answer_start": offset, "text": f"the {two}"}]  # normalises to the first
        paragraphs.append(
            {
                "context": context,
                "qas": [{"id": f"{prefix}{i:06d}", "question": f"Which words follow {cue}?", "answers": answers}],
            }
        )
    return [{"title": f"Synthetic_{prefix}", "paragraphs": paragraphs}]


def stage_articles(stage: Stage, rng: np.random.Generator, task, n_train: int, n_eval: int) -> None:
    # The order of the draws (training articles, then evaluation) fixes what a seed gives.
    train = {"version": "1.1", "data": articles(rng, n_train, "train")}
    stage.write_text("train/train-v1.1.json", json.dumps(train, sort_keys=True) + "\n")
    lines, answers = [], {}
    for article in articles(rng, n_eval, "eval"):
        for para in article["paragraphs"]:
            for qa in para["qas"]:
                lines.append(
                    json.dumps(
                        {
                            "id": qa["id"],
                            "title": article["title"],
                            "context": para["context"],
                            "question": qa["question"],
                        },
                        sort_keys=True,
                    )
                )
                answers[qa["id"]] = [a["text"] for a in qa["answers"]]
    # One answer no span can give, so no model scores a perfect 1.0 (as for images).
    answers[min(answers)] = ["no such answer"]
    stage.write_text("eval/examples.jsonl", "".join(line + "\n" for line in lines))
    stage.write_text("labels/answers.json", json.dumps(answers, sort_keys=True) + "\n")
    stage.counts = {"train": n_train, "eval": n_eval}


def smoke_words(staged) -> list[str]:
    """Every token of a staged synthetic set's texts (its training JSON and evaluation
    questions): the vocabulary a smoke run's synthetic word vectors (GloVe's stand-in) cover."""
    words: set[str] = set()
    train = Path(staged.train_dir) / "train-v1.1.json"
    if train.is_file():
        for article in json.loads(train.read_text()).get("data", []):
            for para in article.get("paragraphs", []):
                words.update(_TOKEN.findall(para.get("context", "")))
                for qa in para.get("qas", []):
                    words.update(_TOKEN.findall(qa.get("question", "")))
    eval_file = Path(staged.eval_dir) / "examples.jsonl"
    if eval_file.is_file():
        for line in eval_file.read_text().splitlines():
            item = json.loads(line)
            words.update(_TOKEN.findall(item.get("context", "")) + _TOKEN.findall(item.get("question", "")))
    return sorted(words)
