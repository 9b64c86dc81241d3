"""CIFAR-10.1 v6 (Recht et al., "Do CIFAR-10 Classifiers Generalize to CIFAR-10?", 2018;
https://github.com/modestyachts/CIFAR-10.1): 2,000 new test images collected from Tiny
Images by CIFAR-10's protocol, the second test set ``runner study generalization`` scores
CIFAR-10 models on.

The official files (the repository's ``datasets/``): ``cifar10.1_v6_data.npy``, uint8
2000 x 32 x 32 x 3 (height, width, RGB), and ``cifar10.1_v6_labels.npy``, 2,000 integer
classes in CIFAR-10's order. Their SHA-256 are pinned (the task's ``ExtraSet``) as
TensorFlow Datasets lists them (``tensorflow_datasets/url_checksums/cifar10_1.txt``). The
arrays are read without trusting their headers (``runner.safe_npy``: no pickle, the
byte count must match the file) and staged C x H x W, as CIFAR-10's own evaluation set.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.staging.checks import Expected, check_count
from runner.staging.extra import check_digests, check_labels, how_to_import, source_digest, stage_details
from runner.staging.stage import Stage
from runner.errors import UserError
from runner.safe_npy import load_npy

DATA = "cifar10.1_v6_data.npy"  # the names and pinned digests: the task's ExtraSet (__init__.py)
LABELS = "cifar10.1_v6_labels.npy"
MAX_BYTES = 256 << 20  # the release's data file is 6 MB


def _load(path: Path, item) -> np.ndarray:
    try:
        return load_npy(path, max_bytes=MAX_BYTES)
    except (ValueError, OSError) as err:
        raise UserError(f"{path} is not a readable .npy array ({err})", how_to_import(item)) from None


def import_files(files: dict[str, Path], target: Path, *, expected: Expected, task, item) -> None:
    digests = check_digests(files, expected, item)
    images, labels = _load(files[DATA], item), _load(files[LABELS], item)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1:] != (32, 32, 3):
        raise UserError(f"{files[DATA]} holds {images.dtype} {images.shape}, not uint8 N x 32 x 32 x 3",
                        how_to_import(item))
    if labels.dtype.kind not in "iu" or labels.shape != (len(images),):
        raise UserError(f"{files[LABELS]} holds {labels.dtype} {labels.shape}, not {len(images):,} integer classes",
                        how_to_import(item))
    check_count("eval", len(images), expected, what=f"CIFAR-10.1 {DATA}", fix=how_to_import(item))
    labels = check_labels(labels, task.num_classes, LABELS, item)
    with Stage(item.name, target, source=f"file:{DATA}+{LABELS}", source_digest=source_digest(digests),
               conforming=expected.official, details=stage_details(item, digests, expected)) as stage:
        stage.save_array("eval/images.npy", images.transpose(0, 3, 1, 2), "uint8")
        stage.save_array("labels/eval_labels.npy", labels, "int64")
        stage.counts = {"eval": len(images)}


def write_standin(folder: Path, images: np.ndarray, labels: np.ndarray) -> None:
    """The two official files for ``images`` (N x 3 x 32 x 32 uint8, the staged layout) and
    ``labels``."""
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / DATA, np.ascontiguousarray(np.asarray(images, np.uint8).transpose(0, 2, 3, 1)))
    np.save(folder / LABELS, np.asarray(labels, np.int32))
