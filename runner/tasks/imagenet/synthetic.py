"""ImageNet's synthetic stand-in: its training split is a tree of JPEGs
(``/data/train/<wnid>/<wnid>_N.JPEG``), so the smoke set is one too, at a small resolution,
with GRID x GRID classes named n00000000... so that sorted-WNID order is the label; the
evaluation set stays an array. Images are ``runner.staging.blocks``' noise with a class block."""

from __future__ import annotations

import numpy as np

from runner.staging.blocks import GRID, blocks
from runner.staging.stage import Stage

SMOKE_SHAPE = (3, 64, 64)  # C, H, W of the smoke tree's images


def stage_tree(stage: Stage, rng: np.random.Generator, task, n_train: int, n_eval: int) -> None:
    from PIL import Image  # lazy: heavy (pillow; a dependency of matplotlib, so always installed)

    classes = GRID * GRID
    # The order of the draws fixes what a seed gives; keep it.
    train_y = rng.integers(0, classes, n_train)
    eval_y = rng.integers(0, classes, n_eval)
    train_x = blocks(rng, train_y, SMOKE_SHAPE)
    eval_x = blocks(rng, eval_y, SMOKE_SHAPE)
    eval_y[0] = (eval_y[0] + 1) % classes  # as for arrays: no model scores a perfect 1.0
    for i, (image, label) in enumerate(zip(train_x, train_y)):
        wnid = f"n{int(label):08d}"
        Image.fromarray(image.transpose(1, 2, 0)).save(stage.path(f"train/{wnid}/{wnid}_{i}.JPEG"),
                                                       "JPEG", quality=95)
    stage.save_array("eval/images.npy", eval_x, "uint8")
    stage.save_array("labels/eval_labels.npy", eval_y, "int64")
    stage.counts = {"train": n_train, "eval": n_eval}
