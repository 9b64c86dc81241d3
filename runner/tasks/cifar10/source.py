"""CIFAR-10 from the official ``cifar-10-python.tar.gz`` (md5 as published on the CIFAR
page and listed by torchvision). Its batches are Python pickles; they are read with an
unpickler that can build nothing but numpy arrays, so a tampered archive cannot run code."""

from __future__ import annotations

import io
import pickle
import tarfile
import warnings
from pathlib import Path

import numpy as np

from runner.errors import UserError
from runner.staging import progress
from runner.staging.checks import Expected, check_count, check_file, file_digest
from runner.staging.stage import Stage, save_classification

ARCHIVE = "cifar-10-python.tar.gz"
FOLDER = "cifar-10-batches-py"
TRAIN_BATCHES = tuple(f"data_batch_{i}" for i in range(1, 6))
EVAL_BATCHES = ("test_batch",)
OFFICIAL = Expected(
    digests={ARCHIVE: ("md5", "c58f30108f718f92721af3b95e74349a")},
    counts={"train": 50_000, "eval": 10_000},
)
FIX = f"download the official {ARCHIVE} again (https://www.cs.toronto.edu/~kriz/cifar.html)"

# The only globals a CIFAR batch needs: numpy's array reconstruction (old and new module
# names) and, for pickles written by Python 3, the codec that rebuilds bytes.
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("_codecs", "encode"),
}


class _ArraysOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"refusing to load {module}.{name}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # numpy.core is an alias in numpy 2
            return super().find_class(module, name)


def load_batch(raw: bytes, *, what: str) -> tuple[np.ndarray, np.ndarray]:
    """``(images uint8 N x 3 x 32 x 32, labels int64 N)`` from one pickled batch."""
    try:
        batch = _ArraysOnlyUnpickler(io.BytesIO(raw), encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as err:
        raise UserError(f"{what} is not a CIFAR-10 batch ({err})", FIX) from None
    if not isinstance(batch, dict):
        raise UserError(f"{what} is not a CIFAR-10 batch (not a dict)", FIX)
    batch = {k.decode("latin1") if isinstance(k, bytes) else k: v for k, v in batch.items()}
    data, labels = batch.get("data"), batch.get("labels")
    if (
        not isinstance(data, np.ndarray)
        or data.dtype != np.uint8
        or data.ndim != 2
        or data.shape[1] != 3072
    ):
        raise UserError(f"{what}: 'data' is not a uint8 array of N x 3072", FIX)
    labels = np.asarray(labels, dtype=np.int64)
    if labels.shape != (len(data),) or labels.min() < 0 or labels.max() > 9:
        raise UserError(f"{what}: 'labels' are not {len(data)} classes in 0..9", FIX)
    # Each row is the red, green then blue 32x32 plane: already C x H x W.
    return data.reshape(-1, 3, 32, 32), labels


def _read_split(
    tar: tarfile.TarFile, names: tuple[str, ...], archive: Path
) -> tuple[np.ndarray, np.ndarray]:
    parts = []
    for name in names:
        member = f"{FOLDER}/{name}"
        try:
            fh = tar.extractfile(member)
        except KeyError:
            fh = None
        if fh is None:
            raise UserError(f"{archive} has no {member}", FIX)
        parts.append(load_batch(fh.read(), what=f"{archive.name}:{member}"))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def import_files(path: Path, target: Path, *, expected: Expected = OFFICIAL) -> None:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path} does not exist", f"pass the path of {ARCHIVE}")
    seen = check_file(path, expected, name=ARCHIVE, fix=FIX)
    source_digest = f"md5:{seen}" if seen else f"sha256:{file_digest(path, show=True)}"
    try:
        with progress.step(f"reading {path.name}"), tarfile.open(path, "r:gz") as tar:
            train_x, train_y = _read_split(tar, TRAIN_BATCHES, path)
            eval_x, eval_y = _read_split(tar, EVAL_BATCHES, path)
    except (tarfile.TarError, OSError, EOFError) as err:
        raise UserError(f"{path} is not a readable tar.gz ({err})", FIX) from None
    what = f"CIFAR-10 archive {path.name}"
    check_count("train", len(train_x), expected, what=what, fix=FIX)
    check_count("eval", len(eval_x), expected, what=what, fix=FIX)
    with Stage(
        "cifar10",
        target,
        source=f"file:{path.name}",
        source_digest=source_digest,
        conforming=expected.official,
    ) as stage:
        save_classification(stage, train_x, train_y, eval_x, eval_y)
