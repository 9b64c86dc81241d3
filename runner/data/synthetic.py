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


# The smoke run's data set, regenerated exactly so by verify and replay.
SMOKE_SIZES = {"n_train": 2048, "n_eval": 512}


def smoke_data(task: str, root: Path) -> StagedData:
    """What every smoke run trains and is scored on (the one recipe: its sizes, seed 0)."""
    return synthetic(task, root, seed=0, **SMOKE_SIZES)
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


# Tasks whose training split is a tree of JPEGs (``/data/train/<wnid>/<wnid>_N.JPEG``): the
# smoke set is one at a small resolution (C, H, W), with GRID x GRID classes named
# n00000000... so that sorted-WNID order is the label; the evaluation set stays an array.
TREE_SMOKE = {"imagenet": (3, 64, 64)}


def _image_tree(stage: Stage, rng: np.random.Generator, n_train: int, n_eval: int,
                shape: tuple[int, ...]) -> None:
    from PIL import Image  # a dependency of matplotlib, so always installed with the runner

    classes = GRID * GRID
    train_y = rng.integers(0, classes, n_train)
    eval_y = rng.integers(0, classes, n_eval)
    train_x = blocks(rng, train_y, shape)
    eval_x = blocks(rng, eval_y, shape)
    eval_y[0] = (eval_y[0] + 1) % classes  # as below: no model scores a perfect 1.0
    for i, (image, label) in enumerate(zip(train_x, train_y)):
        wnid = f"n{int(label):08d}"
        Image.fromarray(image.transpose(1, 2, 0)).save(stage.path(f"train/{wnid}/{wnid}_{i}.JPEG"),
                                                       "JPEG", quality=95)
    stage.save_array("eval/images.npy", eval_x, "uint8")
    stage.save_array("labels/eval_labels.npy", eval_y, "int64")
    stage.counts = {"train": n_train, "eval": n_eval}


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
            # One answer no span can give, so no model scores a perfect 1.0 (as for images).
            answers[min(answers)] = ["no such answer"]
            stage.write_text("eval/examples.jsonl", "".join(line + "\n" for line in lines))
            stage.write_text("labels/answers.json", json.dumps(answers, sort_keys=True) + "\n")
            stage.counts = {"train": n_train, "eval": n_eval}
        elif task in TREE_SMOKE:
            _image_tree(stage, rng, n_train, n_eval, TREE_SMOKE[task])
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
