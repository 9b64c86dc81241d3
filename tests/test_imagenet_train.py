"""ImageNet's training set as a read-only tree: imports of the official tar (a tar of per-class
tars) and of the folder it unpacks to, made small here with a handful of WNIDs; the per-run
check and the full check; bad inputs refused with one line, nothing staged lost."""

from __future__ import annotations

import io
import os
import tarfile

import numpy as np
import pytest
from data_samples import make_devkit, md5

from runner import data
from runner.cli import main
from runner.errors import UserError
from runner.results.layout import entry_runs
from runner.staging.checks import Expected
from runner.tasks.imagenet.train_tree import TRAIN_TAR, check_tree

pytest.importorskip("PIL")

WNIDS = ("n01000000", "n02000000", "n03000000")  # the leaves of data_samples.SYNSETS
PER_CLASS = 4


@pytest.fixture(autouse=True)
def runner_home(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))


def _jpeg(seed: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)).save(buf, "JPEG")
    return buf.getvalue()


def _add(tar: tarfile.TarFile, name: str, payload: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    tar.addfile(info, io.BytesIO(payload))


def make_train_tar(path, wnids=WNIDS, per_class=PER_CLASS) -> None:
    """ILSVRC2012_img_train.tar's layout: n01440764.tar ..., each of n01440764_N.JPEG."""
    with tarfile.open(path, "w") as outer:
        for c, wnid in enumerate(wnids):
            inner = io.BytesIO()
            with tarfile.open(fileobj=inner, mode="w") as tar:
                for i in range(per_class):
                    _add(tar, f"{wnid}_{1000 + i}.JPEG", _jpeg(c * 100 + i))
            _add(outer, f"{wnid}.tar", inner.getvalue())


def make_train_folder(root, wnids=WNIDS, per_class=PER_CLASS):
    for c, wnid in enumerate(wnids):
        (root / wnid).mkdir(parents=True)
        for i in range(per_class):
            (root / wnid / f"{wnid}_{1000 + i}.JPEG").write_bytes(_jpeg(c * 100 + i))
    return root


def _expected(tar=None, **kw) -> Expected:
    digests = {TRAIN_TAR: ("md5", md5(tar))} if tar else {}
    return Expected(digests=digests, counts={"train": len(WNIDS) * PER_CLASS, "classes": len(WNIDS)},
                    official=False, classes=WNIDS, **kw)


def test_official_tar_is_extracted_into_a_checked_tree(tmp_path):
    tar = tmp_path / TRAIN_TAR
    make_train_tar(tar)
    tree = data.import_train_tree("imagenet", tar, expected=_expected(tar))
    assert tree.counts == {"train": 12, "classes": 3} and not tree.in_place and not tree.conforming
    assert tree.source_digest == f"md5:{md5(tar)}"
    assert sorted(p.name for p in tree.root.iterdir()) == list(WNIDS)
    assert (tree.root / "n02000000" / "n02000000_1003.JPEG").read_bytes() == _jpeg(103)
    lines = tree.manifest.read_text().splitlines()
    assert len(lines) == 12 and lines[0].startswith("n01000000/n01000000_1000.JPEG\t")
    report = check_tree(tree, full=True)
    assert (report.files, report.hashed) == (12, 12)
    assert check_tree(tree, sample=5, seed=1).hashed == 5


def test_wrong_md5_and_missing_class_are_refused_and_keep_the_earlier_import(tmp_path):
    good = tmp_path / "good" / TRAIN_TAR
    good.parent.mkdir()
    make_train_tar(good)
    first = data.import_train_tree("imagenet", good, expected=_expected(good))
    bad = tmp_path / TRAIN_TAR
    make_train_tar(bad, per_class=5)
    with pytest.raises(UserError, match=f"is not the official {TRAIN_TAR}: its md5 is") as err:
        data.import_train_tree("imagenet", bad, expected=_expected(good))
    assert "\n" not in str(err.value) and "Fix:" in str(err.value)
    short = tmp_path / "short" / TRAIN_TAR
    short.parent.mkdir()
    make_train_tar(short, wnids=WNIDS[:2])
    with pytest.raises(UserError, match="lacks class n03000000; nothing was imported"):
        data.import_train_tree("imagenet", short, expected=_expected())
    kept = data.train_tree("imagenet")
    assert kept.digest == first.digest and check_tree(kept, full=True).files == 12
    assert not list((tmp_path / "home" / "data").glob(".imagenet-train*"))  # no leftovers


def test_folder_tree_is_kept_in_place_and_devkit_names_the_classes(tmp_path):
    pytest.importorskip("scipy")
    folder = make_train_folder(tmp_path / "train")
    devkit = tmp_path / "ILSVRC2012_devkit_t12.tar.gz"
    make_devkit(devkit, [1, 2, 3])
    tree = data.import_train_tree("imagenet", folder, devkit=devkit, unofficial=True)
    assert tree.in_place and tree.root == folder.resolve() and tree.counts["classes"] == 3
    import shutil

    shutil.rmtree(folder / "n02000000")
    with pytest.raises(UserError, match="n02000000 .a class folder. is missing"):
        check_tree(tree, seed=0)
    with pytest.raises(UserError, match="lacks class n02000000"):
        data.import_train_tree("imagenet", folder, devkit=devkit, unofficial=True)


def test_a_changed_file_is_named_by_the_sampled_and_the_full_check(tmp_path):
    folder = make_train_folder(tmp_path / "train")
    tree = data.import_train_tree("imagenet", folder, expected=_expected())
    target = folder / "n03000000" / "n03000000_1002.JPEG"
    # Same size and mtime, other bytes: only a digest finds it.
    st = target.stat()
    raw = bytearray(target.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    target.write_bytes(bytes(raw))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(UserError, match="n03000000/n03000000_1002.JPEG has different contents"):
        check_tree(tree, full=True)
    with pytest.raises(UserError, match="n03000000_1002.JPEG has different contents"):
        check_tree(tree, sample=12, seed=3)  # a sample of all files
    # A touched file is found by the stat pass alone.
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    with pytest.raises(UserError, match="n03000000_1002.JPEG was modified"):
        check_tree(tree, sample=0)
    (folder / "n01000000" / "n01000000_9.JPEG").write_bytes(b"x")
    with pytest.raises(UserError, match="n01000000_9.JPEG was not imported"):
        check_tree(tree, sample=0)


def test_bad_layouts_are_one_line_errors(tmp_path):
    folder = make_train_folder(tmp_path / "train")
    (folder / "README").write_text("hi")
    with pytest.raises(UserError, match="holds README, which is not a class folder"):
        data.import_train_tree("imagenet", folder, expected=_expected())
    (folder / "README").unlink()
    os.symlink(folder / "n01000000" / "n01000000_1000.JPEG", folder / "n02000000" / "n02000000_7.JPEG")
    with pytest.raises(UserError, match="n02000000_7.JPEG, which is not .*links are refused"):
        data.import_train_tree("imagenet", folder, expected=_expected())
    not_train = tmp_path / "x" / TRAIN_TAR
    not_train.parent.mkdir()
    with tarfile.open(not_train, "w") as tar:
        _add(tar, "ILSVRC2012_val_00000001.JPEG", _jpeg(0))
    with pytest.raises(UserError, match="not a per-class tar"):
        data.import_train_tree("imagenet", not_train, expected=_expected())
    assert data.train_tree("imagenet") is None


def test_cli_import_and_check(tmp_path, capsys, monkeypatch):
    folder = make_train_folder(tmp_path / "train")
    assert main(["data", "import", "imagenet", str(folder), "--unofficial"]) == 0
    out = capsys.readouterr().out
    assert "imported imagenet training tree: 12 images in 3 classes" in out and "NON-CONFORMING" in out
    assert main(["data", "check", "imagenet", "--full"]) == 0
    assert "training tree intact: 12 files' sizes and times, every file re-hashed" in capsys.readouterr().out
    (folder / "n01000000" / "n01000000_1001.JPEG").unlink()
    assert main(["data", "check", "imagenet"]) == 2
    err = capsys.readouterr().err
    assert "n01000000/n01000000_1001.JPEG is missing" in err and "import it again" in err


def test_smoke_set_is_a_jpeg_tree_with_learnable_classes(tmp_path):
    staged = data.synthetic("imagenet", tmp_path / "smoke", n_train=64, n_eval=16, seed=0)
    jpegs = sorted(staged.train_dir.rglob("*.JPEG"))
    assert len(jpegs) == 64 and all(p.parent.name.startswith("n000000") for p in jpegs)
    assert np.load(staged.eval_dir / "images.npy").shape == (16, 3, 64, 64)
    assert staged.load_eval_labels().max() < 16 and not staged.conforming
    again = data.synthetic("imagenet", tmp_path / "again", n_train=64, n_eval=16, seed=0)
    assert again.digest == staged.digest  # verify and replay regenerate it exactly


@pytest.mark.docker
def test_resnet50_imagenet_smoke_runs_signs_and_verifies(docker_client, tmp_path, monkeypatch, capsys):
    """entries/resnet50-imagenet --smoke in the real engine: a synthetic JPEG tree mounted at
    /data/train, the runner's evaluations, scoring, batch-1 inference, a signed bundle."""
    from runner import keys, paths

    pair = keys.generate(tmp_path / "keys")
    monkeypatch.setenv(keys.ENV_VAR, str(pair.private))
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
    monkeypatch.delenv("RUNNER_HOME")  # the shared wheelhouse and base image
    entry = paths.repo_root() / "entries" / "resnet50-imagenet"
    assert main(["reproduce", str(entry), "--smoke", "--seed", "5"]) == 0
    (folder,) = entry_runs(tmp_path / "results", "resnet50-imagenet")
    result = __import__("json").loads((folder / "result.json").read_text())
    assert result["status"] == "complete" and result["smoke"]
    # Non-conforming only because it is a smoke run; the host's mismatches with the profile's
    # 8 V100s are in its hardware record.
    assert result["nonconforming_reasons"] == ["smoke run: one short epoch on synthetic data"]
    assert result["hardware"]["allowed_mismatch"] and result["hardware"]["mismatches"]
    (evaluation,) = result["training"]["evaluations"]
    assert evaluation["count"] == 512 and evaluation["problem"] is None
    assert set(result["inference"]) == {"torch", "onnxruntime"}
    capsys.readouterr()
    assert main(["verify", str(folder), "--trusted-keys", str(pair.public)]) == 3  # verified; a smoke run never counts
