"""The generalization probe: the same checkpoint, scored on a perturbed copy of the
evaluation inputs that the entry never sees.

A model that learned the task loses little when every image moves by one pixel; answers
recalled from the public test set (a lookup keyed on the exact pixels) collapse. The
shift's direction comes from the runner's seed, so an entry cannot prepare for it.
DAWNBench's analysis re-checked its entries on fresh images for the same reason.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np

# Honest entries lose a fraction of a point under a one-pixel shift (MNIST CNN: see
# docs/threat-model.md); recalled answers lose tens of points.
PROBE_GAP_LIMIT = 0.10
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


def make_probe_inputs(eval_dir: Path, target: Path, seed: int) -> Path | None:
    """Write the probe's ``images.npy`` into ``target``; None for tasks without images."""
    source = Path(eval_dir) / "images.npy"
    if not source.is_file():
        return None  # SQuAD: no perturbation that keeps the answers is defined (threat model)
    target.mkdir(parents=True, exist_ok=True)
    np.save(target / "images.npy", shifted(np.load(source), probe_shift(seed)))
    return target


def probe_problem(gap: float | None) -> str | None:
    """The non-conforming reason for a crossing whose probe gap is too large."""
    if gap is None or gap <= PROBE_GAP_LIMIT:
        return None
    return (
        f"class 3 (answers that are not the model's): the crossing checkpoint scores "
        f"{gap * 100:.1f} points lower on inputs shifted by one pixel (limit {PROBE_GAP_LIMIT * 100:.0f})"
    )
