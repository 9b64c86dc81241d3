"""Synthetic data sets for smoke runs: the real layout and shapes, learnable content.

A run on them checks that an entry starts, trains, is evaluated and scored, in seconds;
its result is never conforming (``staged.json`` says so). Images are noise with one bright
block whose place on a grid is the class, so a small model can cross the threshold (and
a one-pixel shift, the generalization probe, barely moves it); tasks with more classes
than places get noise labels."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from runner.data.staging import Stage, save_classification
from runner.data.store import StagedData, load
from runner.tasks import get_task

_WORDS = (
    "river stone castle garden winter lantern harbor violet engine meadow falcon copper "
    "signal orchard canyon marble ribbon glacier timber beacon"
).split()


def _squad_articles(rng: np.random.Generator, n_questions: int, prefix: str) -> list[dict]:
    """SQuAD-format articles whose answers are spans of their contexts."""
    paragraphs = []
    for i in range(n_questions):
        words = [str(w) for w in rng.choice(_WORDS, size=int(rng.integers(12, 30)))]
        start = int(rng.integers(0, len(words) - 2))
        answer = " ".join(words[start : start + int(rng.integers(1, 3))])
        context = " ".join(words)
        paragraphs.append(
            {
                "context": context,
                "qas": [
                    {
                        "id": f"{prefix}{i:06d}",
                        "question": f"Which words follow {words[start - 1] if start else 'the start'}?",
                        "answers": [{"answer_start": context.index(answer), "text": answer}],
                    }
                ],
            }
        )
    return [{"title": f"Synthetic_{prefix}", "paragraphs": paragraphs}]


# The smoke run's data set, regenerated exactly so by verify and replay.
SMOKE_SIZES = {"n_train": 2048, "n_eval": 512}
GRID = 4  # a GRID x GRID board of places for the class's block


def blocks(rng: np.random.Generator, labels: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Noise images (0-63) with a bright block (255) in the cell of each item's class."""
    images = rng.integers(0, 64, (len(labels), *shape), dtype=np.uint8)
    _, height, width = shape
    ch, cw = height // GRID, width // GRID
    for i, label in enumerate(labels):
        if label >= GRID * GRID:
            continue  # more classes than places: this item is noise only
        row, col = divmod(int(label), GRID)
        top, left = row * ch + ch // 4, col * cw + cw // 4
        images[i, :, top:top + ch // 2, left:left + cw // 2] = 255
    return images


def synthetic(task: str, root: Path, n_train: int, n_eval: int, seed: int) -> StagedData:
    """Stage ``n_train``/``n_eval`` random items shaped like ``task`` into ``root``."""
    spec = get_task(task)
    rng = np.random.default_rng(seed)
    with Stage(
        task, Path(root), source=f"synthetic:seed={seed}", source_digest=None, conforming=False
    ) as stage:
        if spec.input_shape is None:  # SQuAD: text, not arrays
            train = {"version": "1.1", "data": _squad_articles(rng, n_train, "train")}
            stage.write_text("train/train-v1.1.json", json.dumps(train, sort_keys=True) + "\n")
            articles = _squad_articles(rng, n_eval, "eval")
            lines, answers = [], {}
            for article in articles:
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
            stage.write_text("eval/examples.jsonl", "".join(line + "\n" for line in lines))
            stage.write_text("labels/answers.json", json.dumps(answers, sort_keys=True) + "\n")
            stage.counts = {"train": n_train, "eval": n_eval}
        else:
            classes = spec.num_classes or 2
            # The order of the draws fixes what a seed gives; keep it.
            train_y = rng.integers(0, classes, n_train)
            eval_y = rng.integers(0, classes, n_eval)
            train_x = blocks(rng, train_y, spec.input_shape)
            eval_x = blocks(rng, eval_y, spec.input_shape)
            # One deliberately wrong label, so no model scores a perfect 1.0 (MLPerf's log
            # checker requires an accuracy below 1) while the threshold stays reachable.
            eval_y[0] = (eval_y[0] + 1) % classes
            save_classification(stage, train_x, train_y, eval_x, eval_y)
    return load(Path(root))
