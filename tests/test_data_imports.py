"""Imports of CIFAR-10, SQuAD v1.1 and ImageNet from files in their official formats,
generated small here; the official checksums and counts are replaced through the
test-only ``expected`` parameter, which also marks the result non-conforming."""

from __future__ import annotations

import json
import pickle
import sys

import numpy as np
import pytest
from data_samples import (
    make_cifar_archive,
    make_devkit,
    make_squad_file,
    make_val_tar,
    md5,
)

from runner import data
from runner.cli import main
from runner.errors import UserError
from runner.staging.checks import Expected
from runner.tasks.cifar10 import source as cifar10


@pytest.fixture(autouse=True)
def runner_home(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))


def _corrupt(path):
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    path.write_bytes(bytes(raw))


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """Run ``runner ...`` as the command does; return its exit code, stdout and stderr."""
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


# -- CIFAR-10 -----------------------------------------------------------------------


def test_cifar_import_stages_official_layout(tmp_path):
    archive = tmp_path / "cifar-10-python.tar.gz"
    arrays = make_cifar_archive(archive, per_batch=4)
    expected = Expected(
        digests={"cifar-10-python.tar.gz": ("md5", md5(archive))},
        counts={"train": 20, "eval": 4},
        official=False,
    )
    staged = data.import_dataset("cifar10", archive, expected=expected)
    train_x = np.load(staged.train_dir / "images.npy")
    assert train_x.shape == (20, 3, 32, 32) and train_x.dtype == np.uint8
    np.testing.assert_array_equal(train_x[:4], arrays["data_batch_1"][0])
    np.testing.assert_array_equal(train_x[16:], arrays["data_batch_5"][0])
    np.testing.assert_array_equal(
        np.load(staged.train_dir / "labels.npy")[4:8], arrays["data_batch_2"][1]
    )
    np.testing.assert_array_equal(np.load(staged.eval_dir / "images.npy"), arrays["test_batch"][0])
    np.testing.assert_array_equal(staged.load_eval_labels(), arrays["test_batch"][1])
    assert sorted(p.name for p in staged.eval_dir.iterdir()) == ["images.npy"]
    assert staged.counts == {"train": 20, "eval": 4}
    assert staged.source_digest == f"md5:{md5(archive)}" and not staged.conforming


def test_cifar_corrupted_archive_is_refused(tmp_path):
    archive = tmp_path / "cifar-10-python.tar.gz"
    make_cifar_archive(archive)
    expected = Expected(digests={"cifar-10-python.tar.gz": ("md5", md5(archive))}, official=False)
    _corrupt(archive)
    with pytest.raises(UserError, match="is not the official cifar-10-python.tar.gz: its md5 is"):
        data.import_dataset("cifar10", archive, expected=expected)
    with pytest.raises(UserError, match="not staged"):
        data.staged("cifar10")


def test_cifar_count_mismatch_is_refused(tmp_path):
    archive = tmp_path / "c.tar.gz"
    make_cifar_archive(archive, per_batch=3)
    with pytest.raises(UserError, match="has 15 items in its train split, expected 50,000"):
        data.import_dataset(
            "cifar10", archive, expected=Expected(counts=cifar10.OFFICIAL.counts, official=False)
        )


def test_cifar_pickle_that_calls_anything_else_is_refused():
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    raw = pickle.dumps({b"data": Evil(), b"labels": []}, protocol=2)
    with pytest.raises(UserError, match=r"refusing to load (__builtin__|builtins)\.print"):
        cifar10.load_batch(raw, what="evil")


def test_cli_refuses_unofficial_cifar_unless_told_and_then_marks_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # so the table does not wrap the digest
    archive = tmp_path / "cifar-10-python.tar.gz"
    make_cifar_archive(archive)
    code, _, err = _cli(["data", "import", "cifar10", str(archive)], capsys)
    assert code != 0 and err.count("\n") == 1
    assert (
        "is not the official cifar-10-python.tar.gz" in err and "c58f30108f718f92721af3b95e74349a" in err
    )
    code, out, _ = _cli(["data", "import", "cifar10", str(archive), "--unofficial"], capsys)
    assert code == 0 and "NON-CONFORMING" in out
    assert not data.staged("cifar10").conforming
    code, out, _ = _cli(["data", "list"], capsys)
    assert code == 0 and "cifar10" in out and data.staged("cifar10").digest[:23] in out


# -- SQuAD v1.1 ----------------------------------------------------------------------


def test_squad_import_splits_questions_from_answers(tmp_path):
    dev = tmp_path / "dev-v1.1.json"
    answers = make_squad_file(dev, n_articles=2, per_paragraph=3)
    train = tmp_path / "train-v1.1.json"
    make_squad_file(train, n_articles=1, per_paragraph=2)
    expected = Expected(
        digests={"dev-v1.1.json": ("md5", md5(dev))}, counts={"eval": 6, "train": 2}, official=False
    )
    staged = data.import_dataset("squad-v1.1", tmp_path, expected=expected)
    examples = [json.loads(x) for x in (staged.eval_dir / "examples.jsonl").read_text().splitlines()]
    assert [e["id"] for e in examples] == list(answers)
    assert all(set(e) == {"id", "title", "context", "question"} for e in examples)
    assert staged.load_eval_labels() == answers
    assert (staged.train_dir / "train-v1.1.json").read_bytes() == train.read_bytes()
    assert staged.counts == {"eval": 6, "train": 2}


def test_squad_checks_version_digest_and_count(tmp_path):
    dev = tmp_path / "dev-v1.1.json"
    make_squad_file(dev, version="2.0")
    with pytest.raises(UserError, match=r"is not SQuAD v1.1 \(version field is '2.0'\)"):
        data.import_dataset("squad-v1.1", dev, unofficial=True)
    make_squad_file(dev)
    with pytest.raises(UserError, match="its md5 is .* expected 3e85deb501d4e538b6bc56f786231552"):
        data.import_dataset("squad-v1.1", dev)
    with pytest.raises(UserError, match="has 6 items in its eval split, expected 10,570"):
        data.import_dataset(
            "squad-v1.1", dev, expected=Expected(counts={"eval": 10_570}, official=False)
        )
    good = Expected(digests={"dev-v1.1.json": ("md5", md5(dev))}, official=False)
    _corrupt(dev)
    with pytest.raises(UserError, match="is not the official dev-v1.1.json"):
        data.import_dataset("squad-v1.1", dev, expected=good)


# -- ImageNet ------------------------------------------------------------------------

SIZES = [(300, 200), (180, 400), (256, 256), (500, 375)]
TRUTH = [3, 1, 2, 1]  # ILSVRC2012_IDs; sorted-WNID classes are 1, 2, 0, 2


@pytest.fixture
def imagenet_files(tmp_path):
    pytest.importorskip("PIL", reason="the imagenet extra (Pillow) is not installed")
    pytest.importorskip("scipy", reason="the imagenet extra (SciPy) is not installed")
    val, devkit = tmp_path / "ILSVRC2012_img_val.tar", tmp_path / "ILSVRC2012_devkit_t12.tar.gz"
    make_val_tar(val, SIZES)
    make_devkit(devkit, TRUTH)
    expected = Expected(
        digests={
            "ILSVRC2012_img_val.tar": ("md5", md5(val)),
            "ILSVRC2012_devkit_t12.tar.gz": ("md5", md5(devkit)),
        },
        counts={"eval": len(SIZES)},
        official=False,
    )
    return val, devkit, expected


def test_imagenet_import_decodes_crops_and_maps_labels(imagenet_files):
    from PIL import Image

    val, devkit, expected = imagenet_files
    staged = data.import_dataset("imagenet", val, devkit=devkit, expected=expected)
    images = np.load(staged.eval_dir / "images.npy", mmap_mode="r")
    assert images.shape == (4, 3, 224, 224) and images.dtype == np.uint8
    assert staged.load_eval_labels().tolist() == [1, 2, 0, 2]
    # Same pixels as decoding the second image directly: resize short side to 256, crop centre.
    import tarfile

    with tarfile.open(val) as tar:
        img = Image.open(tar.extractfile("ILSVRC2012_val_00000002.JPEG")).convert("RGB")
    img = img.resize((256, int(256 * 400 / 180)), Image.Resampling.BILINEAR)
    top = round((img.size[1] - 224) / 2)
    want = np.asarray(img.crop((16, top, 240, top + 224))).transpose(2, 0, 1)
    np.testing.assert_array_equal(images[1], want)
    assert not (staged.train_dir / "images.npy").exists() and staged.counts == {"eval": 4}


def test_imagenet_corrupted_tar_and_wrong_count_are_refused(imagenet_files):
    val, devkit, expected = imagenet_files
    with pytest.raises(UserError, match="has 4 items in its eval split, expected 50,000"):
        data.import_dataset(
            "imagenet", val, devkit=devkit, expected=Expected(counts={"eval": 50_000}, official=False)
        )
    with pytest.raises(UserError, match="pass --devkit"):
        data.import_dataset("imagenet", val, expected=expected)
    _corrupt(val)
    with pytest.raises(UserError, match="is not the official ILSVRC2012_img_val.tar"):
        data.import_dataset("imagenet", val, devkit=devkit, expected=expected)
    with pytest.raises(UserError, match="29b22e2961454d5413ddabcf34fc5622"):
        data.import_dataset("imagenet", val, devkit=devkit)


def test_imagenet_without_pillow_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)  # makes `from PIL import Image` fail
    with pytest.raises(UserError) as err:
        data.import_dataset(
            "imagenet", tmp_path / "ILSVRC2012_img_val.tar", devkit=tmp_path / "d.tar.gz"
        )
    assert "needs Pillow" in str(err.value) and "runner[imagenet]" in str(err.value)
