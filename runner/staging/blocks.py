"""The generic synthetic image maker: noise with one bright block whose place on a grid is
the class, so a small model can cross the threshold (and a one-pixel shift, the
generalization probe, barely moves it); tasks with more classes than places get noise
labels. Image tasks use ``stage_arrays`` as their synthetic stand-in, or ``blocks`` in their
own maker (ImageNet's tree)."""

from __future__ import annotations

import numpy as np

from runner.staging.stage import Stage, save_classification

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


def stage_arrays(stage: Stage, rng: np.random.Generator, task, n_train: int, n_eval: int) -> None:
    """A classification set of ``task``'s shape as arrays (``save_classification``'s layout)."""
    classes = task.num_classes or 2
    # The order of the draws fixes what a seed gives; keep it.
    train_y = rng.integers(0, classes, n_train)
    eval_y = rng.integers(0, classes, n_eval)
    train_x = blocks(rng, train_y, task.input_shape)
    eval_x = blocks(rng, eval_y, task.input_shape)
    # One deliberately wrong label, so no model scores a perfect 1.0 (MLPerf's log
    # checker requires an accuracy below 1) while the threshold stays reachable.
    eval_y[0] = (eval_y[0] + 1) % classes
    save_classification(stage, train_x, train_y, eval_x, eval_y)
