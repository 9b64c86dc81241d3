"""The generalization probe: the same checkpoint, scored on a perturbed copy of the
evaluation inputs that the entry never sees.

A model that learned the task loses little when every image moves by one pixel; answers
recalled from the public test set (a lookup keyed on the exact pixels) collapse. The
shift's direction comes from the runner's seed, so an entry cannot prepare for it.
DAWNBench's analysis re-checked its entries on fresh images for the same reason.

For questions (SQuAD) the perturbation is text: one sentence unrelated to any question,
drawn from the seed, appended to every context. The answers keep their character spans,
so the same answers score them; this is adversarial SQuAD's (Jia and Liang, 2017)
control rather than its AddSent attack, which costs honest models tens of points. Answers
recalled by the exact context text collapse; a reader loses little. Same limit: 0.10 F1.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

# Honest entries lose a fraction of a point under a one-pixel shift (MNIST CNN: see
# docs/threat-model.md); recalled answers lose tens of points.
PROBE_GAP_LIMIT = 0.10
# The probe predicts this many shifted images, drawn by the run's seed. The gap is taken on
# the same items of the clean predictions: its standard error is a few tenths of a point,
# against a limit of ten points (the whole set cost about 0.4 s per evaluation on two cores).
PROBE_ITEMS = 2000
SHIFTS = ((0, 1), (0, -1), (1, 0), (-1, 0))  # (rows, columns)


def probe_shift(seed: int) -> tuple[int, int]:
    return SHIFTS[random.Random(f"probe:{seed}").randrange(len(SHIFTS))]


def shifted(images: np.ndarray, shift: tuple[int, int]) -> np.ndarray:
    """``images`` (N x C x H x W) moved by ``shift`` pixels; the uncovered edge repeats."""
    dy, dx = shift
    out = np.roll(images, (dy, dx), axis=(2, 3))
    if dy > 0:
        out[:, :, :dy] = out[:, :, dy:dy + 1]
    elif dy < 0:
        out[:, :, dy:] = out[:, :, dy - 1:dy]
    if dx > 0:
        out[:, :, :, :dx] = out[:, :, :, dx:dx + 1]
    elif dx < 0:
        out[:, :, :, dx:] = out[:, :, :, dx - 1:dx]
    return out


DISTRACTORS = (
    "The committee met again in the spring to review the budget.",
    "Several visitors arrived late because of the heavy rain.",
    "A new bridge was opened to traffic the following year.",
    "The museum extended its opening hours during the summer.",
    "Local newspapers reported the event on their front pages.",
    "Most of the older buildings were repaired after the storm.",
    "The train to the coast was delayed by almost an hour.",
    "Students gathered in the library to prepare for their exams.",
)


def probe_distractor(seed: int) -> str:
    return DISTRACTORS[random.Random(f"probe-text:{seed}").randrange(len(DISTRACTORS))]


def with_distractor(eval_dir: Path, target: Path, seed: int) -> None:
    """``examples.jsonl`` with the seed's distractor sentence appended to every context."""
    sentence = probe_distractor(seed)
    lines = []
    for line in (Path(eval_dir) / "examples.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            ex = json.loads(line)
            ex["context"] = f"{ex['context'].rstrip()} {sentence}"
            lines.append(json.dumps(ex, ensure_ascii=False, sort_keys=True))
    (target / "examples.jsonl").write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")


def probe_record(task, seed: int) -> dict:
    """result.json's ``probe``: what the run's probe changed."""
    if getattr(task, "inputs", "images") == "questions":
        return {"distractor_sentence": probe_distractor(seed), "limit": PROBE_GAP_LIMIT}
    return {"shift_pixels": list(probe_shift(seed)), "items": PROBE_ITEMS}


def make_probe_inputs(eval_dir: Path, target: Path, seed: int) -> Path | None:
    """Write the probe's inputs into ``target`` (``images.npy``, or ``examples.jsonl`` with a
    distractor sentence); None for a set with neither."""
    if (Path(eval_dir) / "examples.jsonl").is_file():
        target.mkdir(parents=True, exist_ok=True)
        with_distractor(eval_dir, target, seed)
        return target
    source = Path(eval_dir) / "images.npy"
    if not source.is_file():
        return None
    target.mkdir(parents=True, exist_ok=True)
    np.save(target / "images.npy", shifted(np.load(source), probe_shift(seed)))
    return target


def probe_subset(n: int, items: object, seed: object):
    """The item indices a probe predicted (``items`` of ``n`` drawn by ``seed``), or None when
    it predicted every item (no subset recorded: questions, and results from before subsets)."""
    if isinstance(items, int) and not isinstance(items, bool) and items > 0 and isinstance(seed, int):
        from runner.harness.evaluate import probe_items  # lazy: start-up (runner --help)

        return probe_items(n, seed, items)
    return None


def probe_problem(gap: float | None, task=None) -> str | None:
    """The non-conforming reason for a crossing whose probe gap is too large (the limit: the
    rules ``task`` applies, ``Task.rules.probe_gap``; without a task, today's)."""
    rules = getattr(task, "rules", None)
    limit = rules.probe_gap if rules is not None else PROBE_GAP_LIMIT
    if gap is None or gap <= limit:
        return None
    if getattr(task, "inputs", "images") == "questions":
        return (f"class 3 (answers that are not the model's): the crossing checkpoint scores {gap:.4f} F1 lower "
                f"with an unrelated sentence appended to every context (limit {limit:.2f})")
    return (
        f"class 3 (answers that are not the model's): the crossing checkpoint scores "
        f"{gap * 100:.1f} points lower on inputs shifted by one pixel (limit {limit * 100:.0f})"
    )
