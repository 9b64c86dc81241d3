"""Fashion-MNIST from Debian's ``dataset-fashion-mnist`` package: the publisher's idx
files, gzipped, under ``/usr/share/datasets/fashion-mnist/``. Debian recompresses them,
so the archives' digests differ from Zalando's; the staged arrays are pinned instead."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import numpy as np

from runner.errors import UserError
from runner.staging import progress
from runner.staging.checks import file_digest
from runner.staging.stage import Stage, save_classification

DEBIAN_PACKAGE = "dataset-fashion-mnist"
DEFAULT_DIR = Path("/usr/share/datasets/fashion-mnist")
FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "eval": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
COUNTS = {"train": 60_000, "eval": 10_000}
_IMAGES_MAGIC, _LABELS_MAGIC = 2051, 2049

# sha256 of the staged .npy files, computed once from the Debian package above.
PINNED = {
    "train/images.npy": "4d6d54d7b7f1d1146412ac0d5ebfad200214b8dbc262a70b79e84877afef3279",
    "train/labels.npy": "eb6efccc70db136ce327076edeadbbcba39b38ab16fd8f89b0625f62fc605f24",
    "eval/images.npy": "4cdcdb7b44ef667e143916344990c85c236bee299a09d137df3050c35ba6eb91",
    "labels/eval_labels.npy": "33e7c41e1d27e7ea46528a86fd6d54e0eb0d60f705e95ae5e9c956635f269cbc",
}


def source_dir() -> Path:
    """Where the idx files are; ``RUNNER_FASHION_MNIST_DIR`` points elsewhere."""
    return Path(os.environ.get("RUNNER_FASHION_MNIST_DIR", DEFAULT_DIR))


def _missing(folder: Path) -> list[str]:
    return [name for pair in FILES.values() for name in pair if not (folder / name).is_file()]


def _on_debian_as_root() -> bool:
    return (
        Path("/etc/debian_version").is_file()
        and os.geteuid() == 0
        and shutil.which("apt-get") is not None
    )


def ensure_installed(folder: Path) -> None:
    """Install the Debian package when it is missing and we may; else say how to."""
    if not _missing(folder):
        return
    fix = f"install the Debian package: `sudo apt-get install {DEBIAN_PACKAGE}`"
    if folder != DEFAULT_DIR or not _on_debian_as_root():
        raise UserError(
            f"Fashion-MNIST files are missing from {folder}: {', '.join(_missing(folder))}", fix
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    with progress.step(f"installing {DEBIAN_PACKAGE} with apt-get"):
        done = subprocess.run(
            ["apt-get", "install", "-y", DEBIAN_PACKAGE], capture_output=True, text=True, env=env
        )
        if done.returncode != 0:  # the package lists may be missing or stale
            subprocess.run(["apt-get", "update"], capture_output=True, text=True, env=env)
            done = subprocess.run(
                ["apt-get", "install", "-y", DEBIAN_PACKAGE], capture_output=True, text=True, env=env
            )
    if done.returncode != 0 or _missing(folder):
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"apt-get could not install {DEBIAN_PACKAGE}: {last}", fix)


def read_idx(path: Path, magic: int) -> np.ndarray:
    """An idx file: big-endian magic, one uint32 per dimension, then uint8 data."""
    with gzip.open(path, "rb") as fh:
        raw = fh.read()
    header = np.frombuffer(raw, dtype=">u4", count=1)
    if raw[:2] != b"\0\0" or int(header[0]) != magic:
        raise UserError(f"{path} is not an idx file of the expected kind", f"reinstall {DEBIAN_PACKAGE}")
    ndim = raw[3]
    dims = tuple(int(d) for d in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise UserError(
            f"{path} is truncated ({body.size} bytes for shape {dims})", f"reinstall {DEBIAN_PACKAGE}"
        )
    return body.reshape(dims)


def read_split(folder: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    images_name, labels_name = FILES[split]
    images = read_idx(folder / images_name, _IMAGES_MAGIC)
    labels = read_idx(folder / labels_name, _LABELS_MAGIC)
    if len(images) != len(labels) or len(images) != COUNTS[split] or images.shape[1:] != (28, 28):
        raise UserError(
            f"Fashion-MNIST {split} split has {len(images)} images of {images.shape[1:]} and "
            f"{len(labels)} labels, expected {COUNTS[split]} of (28, 28)",
            f"reinstall {DEBIAN_PACKAGE}",
        )
    return images.reshape(-1, 1, 28, 28), labels.astype(np.int64)


def source_digest(folder: Path) -> str:
    """One digest over the four archives as found (sha256 of ``<sha256>  <name>`` lines)."""
    names = sorted(name for pair in FILES.values() for name in pair)
    lines = "".join(f"{file_digest(folder / n)}  {n}\n" for n in names)
    return "sha256:" + hashlib.sha256(lines.encode()).hexdigest()


def prepare(target: Path) -> None:
    folder = source_dir()
    ensure_installed(folder)
    with progress.step("reading Fashion-MNIST idx files"):
        train_x, train_y = read_split(folder, "train")
        eval_x, eval_y = read_split(folder, "eval")
    with Stage(
        "fashion-mnist",
        target,
        source=f"debian:{DEBIAN_PACKAGE} ({folder})",
        source_digest=source_digest(folder),
        conforming=True,
        pinned=PINNED,
    ) as stage:
        save_classification(stage, train_x, train_y, eval_x, eval_y)
