"""QMNIST's test split (Yadav and Bottou, "Cold Case: The Lost MNIST Digits", 2019;
https://github.com/facebookresearch/qmnist): MNIST's preprocessing rebuilt from NIST SD19.
Its 60,000 test rows are, first, the 10,000 digits of MNIST's test set, then the 50,000
test digits MNIST's authors never released: those 50,000 (rows 10,000..59,999) are the
second test set ``runner study generalization`` scores MNIST models on.

The official files, as published in the repository above:

- ``qmnist-test-images-idx3-ubyte.gz``: idx3-ubyte (magic 0x00000803, dimensions
  60000 x 28 x 28, uint8 pixels), gzipped;
- ``qmnist-test-labels-idx2-int.gz``: idx2-int (magic 0x00000C02, dimensions 60000 x 8,
  big-endian int32), gzipped; column 0 is the class, the others NIST's facts (HSF series,
  writer id, digit index, NIST class code, global index, duplicate flag, unused).

Their SHA-256 are pinned (the task's ``ExtraSet``, ``__init__.py``) as torchvision's QMNIST
dataset lists them (``torchvision/prototype/datasets/_builtin/mnist.py``,
``QMNIST._CHECKSUMS``). Each file is
read through a bounded gzip stream: the header's dimensions are checked before any data is
read, and the body must be exactly that long.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import numpy as np

from runner.staging import progress
from runner.staging.checks import Expected, check_count
from runner.staging.extra import check_digests, check_labels, how_to_import, source_digest, stage_details
from runner.staging.stage import Stage
from runner.errors import UserError

IMAGES = "qmnist-test-images-idx3-ubyte.gz"  # the names and pinned digests: the task's ExtraSet (__init__.py)
LABELS = "qmnist-test-labels-idx2-int.gz"
FIRST_EXTRA = 10_000  # rows 0..9,999 are MNIST's own test set
ROWS = 60_000
LABEL_COLUMNS = 8
IMAGES_MAGIC, LABELS_MAGIC = 0x0803, 0x0C02  # idx: zero, zero, type (08 ubyte, 0C int32), dimensions
MAX_ROWS = 1_000_000  # far above the release's 60,000: a header claiming more is not QMNIST


def _read_idx(path: Path, magic: int, dims: int, item_shape: tuple[int, ...], dtype: str, item) -> np.ndarray:
    """An idx array from a gzipped file, its header checked before its body is read."""
    fix = how_to_import(item)
    header_bytes = 4 + 4 * dims
    try:
        with gzip.open(path, "rb") as fh:
            header = fh.read(header_bytes)
            if len(header) < header_bytes:
                raise UserError(f"{path} is truncated: its idx header is incomplete", fix)
            fields = np.frombuffer(header, dtype=">u4")
            if int(fields[0]) != magic:
                raise UserError(f"{path} is not an idx file of the expected kind (magic {int(fields[0]):#010x}, "
                                f"expected {magic:#010x})", fix)
            shape = tuple(int(d) for d in fields[1:])
            if not 0 < shape[0] <= MAX_ROWS or shape[1:] != item_shape:
                raise UserError(f"{path} holds an array of {shape}, not N x {' x '.join(map(str, item_shape))}", fix)
            size = int(np.prod(shape)) * np.dtype(dtype).itemsize
            body = fh.read(size)
            if len(body) < size:
                raise UserError(f"{path} is truncated ({len(body):,} of {size:,} bytes of data)", fix)
            if fh.read(1):
                raise UserError(f"{path} holds more data than its header declares", fix)
    except (OSError, EOFError, zlib.error) as err:  # not gzip, or a gzip stream cut short
        raise UserError(f"{path} is not a readable gzip file ({err})", fix) from None
    return np.frombuffer(body, dtype=dtype).reshape(shape)


def read_files(files: dict[str, Path], item) -> tuple[np.ndarray, np.ndarray]:
    """(every row's image N x 28 x 28 uint8, every row's 8 label columns N x 8 int64)."""
    with progress.step(f"reading {IMAGES}"):
        images = _read_idx(files[IMAGES], IMAGES_MAGIC, 3, (28, 28), "u1", item)
        labels = _read_idx(files[LABELS], LABELS_MAGIC, 2, (LABEL_COLUMNS,), ">i4", item).astype(np.int64)
    if len(images) != len(labels):
        raise UserError(f"{IMAGES} has {len(images):,} rows and {LABELS} {len(labels):,}: not one release",
                        how_to_import(item))
    return images, labels


def import_files(files: dict[str, Path], target: Path, *, expected: Expected, task, item) -> None:
    digests = check_digests(files, expected, item)
    images, labels = read_files(files, item)
    if len(images) <= FIRST_EXTRA:
        raise UserError(f"{files[IMAGES]} has {len(images):,} rows: none past MNIST's own {FIRST_EXTRA:,}",
                        how_to_import(item))
    extra_x = images[FIRST_EXTRA:].reshape(-1, 1, 28, 28)
    extra_y = check_labels(labels[FIRST_EXTRA:, 0], task.num_classes, LABELS, item)
    check_count("eval", len(extra_x), expected, what=f"QMNIST's extra test digits in {IMAGES}", fix=how_to_import(item))
    with Stage(item.name, target, source=f"file:{IMAGES}+{LABELS}", source_digest=source_digest(digests),
               conforming=expected.official,
               details=stage_details(item, digests, expected,
                                     rows=f"{FIRST_EXTRA}..{len(images) - 1} of the test split")) as stage:
        stage.save_array("eval/images.npy", extra_x, "uint8")
        stage.save_array("labels/eval_labels.npy", extra_y, "int64")
        stage.counts = {"eval": len(extra_x)}


def write_files(folder: Path, images: np.ndarray, labels: np.ndarray) -> None:
    """The two official files for ``images`` (N x 28 x 28 or N x 1 x 28 x 28 uint8) and
    ``labels`` (N x 8, or N classes: the other columns are written as zeros)."""
    images = np.asarray(images, dtype=np.uint8).reshape(-1, 28, 28)
    labels = np.asarray(labels, dtype=np.int64)
    if labels.ndim == 1:
        labels = np.concatenate([labels[:, None], np.zeros((len(labels), LABEL_COLUMNS - 1), np.int64)], axis=1)
    folder.mkdir(parents=True, exist_ok=True)
    for name, magic, array, dtype in ((IMAGES, IMAGES_MAGIC, images, "u1"), (LABELS, LABELS_MAGIC, labels, ">i4")):
        header = np.array([magic, *array.shape], dtype=">u4").tobytes()
        with gzip.open(folder / name, "wb", compresslevel=1) as fh:
            fh.write(header + np.ascontiguousarray(array, dtype=dtype).tobytes())


def write_standin(folder: Path, images: np.ndarray, labels: np.ndarray, leading=None) -> None:
    """A stand-in for the test split in its official format: ``leading`` (images, labels) as
    rows 0..9,999 (MNIST's test set in the real files; blank digits when not given), then
    ``images`` and ``labels`` as the extra rows the import stages."""
    if leading is None:
        leading = (np.zeros((FIRST_EXTRA, 28, 28), np.uint8), np.zeros(FIRST_EXTRA, np.int64))
    lead_x, lead_y = (np.asarray(a) for a in leading)
    if len(lead_x) != FIRST_EXTRA or len(lead_y) != FIRST_EXTRA:
        raise ValueError(f"the leading rows must be {FIRST_EXTRA:,}")
    write_files(folder, np.concatenate([lead_x.reshape(-1, 28, 28), np.asarray(images).reshape(-1, 28, 28)]),
                np.concatenate([lead_y, np.asarray(labels)]))
