"""Second test sets (``Task.extra_sets``: QMNIST, CIFAR-10.1, ImageNetV2) imported from files
in their official formats, written small here by each set's own stand-in writer (the real
files cannot be fetched here); hostile files (a wrong digest, a truncated file, another
format) refused in one line with the fix, nothing kept. Also the generalization study's
statistics: the intervals, the linear head, and the bounds on the features an entry's image
returns."""

from __future__ import annotations

import gzip
import json
import os
import tarfile

import numpy as np
import pytest

from runner.cli import main
from runner.data import extra_sets
from runner.staging.checks import Expected
from runner.errors import UserError
from runner.study import transfer
from runner.study.generalization import parse_reference
from runner.study.intervals import newcombe, paired, wilson
from runner.study.linear_head import train_head
from runner.tasks import TASKS, extra_set

UNOFFICIAL = Expected(official=False)


@pytest.fixture(autouse=True)
def runner_home(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))  # the user's staged data is never touched


def items(name: str, n: int = 24, seed: int = 0):
    task, item = extra_set(name)
    shape = (3, 40, 48) if name == "imagenetv2" else task.input_shape  # any size: ImageNetV2 is resized
    rng = np.random.default_rng(seed)
    return task, item, rng.integers(0, 256, (n, *shape), dtype=np.uint8), rng.integers(0, task.num_classes, n)


def standin(tmp_path, name: str, n: int = 24, seed: int = 0):
    task, item, images, labels = items(name, n, seed)
    folder = tmp_path / f"{name}-files"
    item.load().write_standin(folder, images, labels)
    return folder, images, labels


def nothing_staged(name: str) -> bool:
    """No set and no temporary folder left where the set is staged."""
    parent = extra_sets.root(name).parent
    return not parent.exists() or list(parent.iterdir()) == []


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_one_line(code: int, err: str, *needles: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]  # a progress bar may leave an empty line
    assert code == 2 and len(lines) == 1 and lines[0].startswith("runner: error: "), err
    assert "Traceback" not in err and "Fix:" in err
    for needle in needles:
        assert needle in err, (needle, err)


# -- the declarations ---------------------------------------------------------------------------

def test_every_second_test_set_is_declared_with_pinned_digests_and_one_interface():
    names = [i.name for t in TASKS.values() for i in t.extra_sets]
    public = {i.name for t in TASKS.values() for i in t.public_inputs}
    assert sorted(names) == ["cifar10.1", "imagenetv2", "qmnist"]
    assert len(set(names)) == len(names) and not set(names) & (set(TASKS) | public)  # one `runner data import` name space
    for task in TASKS.values():
        for item in task.extra_sets:
            assert all(len(d) == 64 and int(d, 16) >= 0 for _, d in item.files), item.name
            assert item.count > 0 and item.url.startswith("https://") and item.digest_source
            module = item.load()
            assert callable(module.import_files) and callable(module.write_standin)
    # For the MNIST entries the transfer goes to Fashion-MNIST, a task of the same shape.
    mnist = extra_set("qmnist")[0]
    assert [TASKS[t].input_shape for t in mnist.transfer_tasks] == [mnist.input_shape]


# -- imports of stand-ins in the official formats -----------------------------------------------

@pytest.mark.parametrize("name", ["qmnist", "cifar10.1", "imagenetv2"])
def test_a_standin_in_the_official_format_is_staged_like_an_evaluation_set(tmp_path, name):
    folder, images, labels = standin(tmp_path, name)
    staged = extra_sets.import_extra(name, folder, expected=UNOFFICIAL)
    assert staged.root == extra_sets.root(name) and staged.counts == {"eval": len(images)}
    assert sorted(p.name for p in staged.eval_dir.iterdir()) == ["images.npy"]  # the labels stay host-only
    staged_images, staged_labels = np.load(staged.eval_dir / "images.npy"), staged.load_eval_labels()
    if name == "imagenetv2":  # JPEGs in class folders: preprocessed as ImageNet's, in (class, file) order
        assert staged_images.shape == (len(images), 3, 224, 224)
        assert staged_labels.tolist() == sorted(labels.tolist())
    else:
        np.testing.assert_array_equal(staged_images, images)
        np.testing.assert_array_equal(staged_labels, labels)
    assert not staged.conforming and staged.details["digests"].startswith("recorded at import")
    assert set(staged.details["files"]) == {f for f, _ in extra_set(name)[1].files}
    staged.verify()


def test_qmnist_stages_the_rows_after_mnists_own_test_set(tmp_path):
    from runner.tasks.mnist import qmnist

    task, item, images, labels = items("qmnist", 30)
    lead = (np.full((qmnist.FIRST_EXTRA, 28, 28), 7, np.uint8), np.full(qmnist.FIRST_EXTRA, 3))
    folder = tmp_path / "files"
    qmnist.write_standin(folder, images, labels, leading=lead)
    # idx2-int labels: 8 big-endian int32 columns, the first the class
    with gzip.open(folder / qmnist.LABELS) as fh:
        raw = fh.read()
    assert np.frombuffer(raw[:12], ">u4").tolist() == [0x0C02, qmnist.FIRST_EXTRA + 30, 8]
    staged = extra_sets.import_extra("qmnist", folder, expected=UNOFFICIAL)
    np.testing.assert_array_equal(np.load(staged.eval_dir / "images.npy"), images)
    assert staged.details["rows"] == f"{qmnist.FIRST_EXTRA}..{qmnist.FIRST_EXTRA + 29} of the test split"


def test_the_cli_imports_unofficial_files_and_says_so(tmp_path, capsys):
    folder, images, _ = standin(tmp_path, "qmnist")
    code, out, err = cli(capsys, "data", "import", "qmnist", str(folder / "qmnist-test-images-idx3-ubyte.gz"),
                         "--unofficial")
    assert code == 0, err
    assert f"imported second test set qmnist: {len(images):,} items" in out and "UNOFFICIAL" in out
    assert "recorded at import" in out
    code, out, _ = cli(capsys, "data", "list")
    assert f"second test set qmnist: {len(images):,} items (UNOFFICIAL)" in out
    assert "second test set cifar10.1: not imported" in out


# -- hostile files: one line with the fix, nothing kept -------------------------------------------

@pytest.mark.parametrize("name", ["qmnist", "cifar10.1", "imagenetv2"])
def test_files_that_are_not_the_published_ones_are_refused_by_digest(tmp_path, capsys, name):
    folder, _, _ = standin(tmp_path, name)
    code, _, err = cli(capsys, "data", "import", name, str(folder))
    assert_one_line(code, err, "is not the official", "the published one", "--unofficial")
    assert nothing_staged(name)


def test_a_failed_import_keeps_the_set_staged_before(tmp_path, capsys):
    good, images, _ = standin(tmp_path, "qmnist")
    assert cli(capsys, "data", "import", "qmnist", str(good), "--unofficial")[0] == 0
    before = extra_sets.staged_extra("qmnist").digest
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in good.iterdir():
        (bad / f.name).write_bytes(f.read_bytes()[: f.stat().st_size // 2])  # both truncated
    code, _, err = cli(capsys, "data", "import", "qmnist", str(bad), "--unofficial")
    assert_one_line(code, err, "qmnist-test-images-idx3-ubyte.gz")
    assert extra_sets.staged_extra("qmnist").digest == before
    assert [p.name for p in extra_sets.root("qmnist").parent.iterdir()] == ["qmnist"]  # no temp folder left


def _idx(path, header: list[int], body: bytes) -> None:
    with gzip.open(path, "wb") as fh:
        fh.write(np.array(header, ">u4").tobytes() + body)


@pytest.mark.parametrize("case, needle", [
    ("truncated-gzip", "not a readable gzip file"),
    ("truncated-body", "is truncated"),
    ("wrong-magic", "not an idx file of the expected kind"),
    ("huge-header", "not N x 28 x 28"),
    ("trailing-data", "more data than its header declares"),
    ("not-gzip", "not a readable gzip file"),
    ("rows-disagree", "not one release"),
    ("no-extra-rows", "none past MNIST's own"),
    ("bad-label", "labels outside 0..9"),
    ("missing-labels", "holds no qmnist-test-labels-idx2-int.gz"),
])
def test_qmnist_files_of_another_format_are_refused_in_one_line(tmp_path, capsys, case, needle):
    from runner.tasks.mnist import qmnist

    folder, _, _ = standin(tmp_path, "qmnist", n=4)
    images, labels = folder / qmnist.IMAGES, folder / qmnist.LABELS
    rows = qmnist.FIRST_EXTRA + 4
    if case == "truncated-gzip":
        images.write_bytes(images.read_bytes()[:-20])
    elif case == "truncated-body":
        _idx(images, [0x0803, rows, 28, 28], b"\0" * 100)
    elif case == "wrong-magic":
        _idx(labels, [0x0801, rows], b"\0" * rows)  # MNIST's idx1-ubyte labels, not QMNIST's idx2-int
    elif case == "huge-header":
        _idx(images, [0x0803, rows, 2**20, 2**20], b"")  # claims a terabyte: refused before any read
    elif case == "trailing-data":
        with gzip.open(images) as fh:
            raw = fh.read()
        with gzip.open(images, "wb") as fh:
            fh.write(raw + b"\0")
    elif case == "not-gzip":
        images.write_bytes(b"P5 28 28 255\n" + b"\0" * 784)
    elif case == "rows-disagree":
        _idx(labels, [0x0C02, rows - 1, 8], b"\0" * (rows - 1) * 32)
    elif case == "no-extra-rows":
        qmnist.write_files(folder, np.zeros((5, 28, 28), np.uint8), np.zeros(5, np.int64))
    elif case == "bad-label":
        qmnist.write_files(folder, np.zeros((rows, 28, 28), np.uint8), np.full(rows, 10))
    elif case == "missing-labels":
        labels.unlink()
    code, _, err = cli(capsys, "data", "import", "qmnist", str(folder), "--unofficial")
    assert_one_line(code, err, needle)
    assert nothing_staged("qmnist")


@pytest.mark.parametrize("case, needle", [
    ("float-images", "not uint8 N x 32 x 32 x 3"),
    ("channels-first", "not uint8 N x 32 x 32 x 3"),
    ("pickled-labels", "not a readable .npy array"),
    ("truncated", "not a readable .npy array"),
    ("labels-short", "integer classes"),
    ("bad-label", "labels outside 0..9"),
])
def test_cifar10_1_files_of_another_format_are_refused_in_one_line(tmp_path, capsys, case, needle):
    folder, images, labels = standin(tmp_path, "cifar10.1", n=6)
    data, labels_file = folder / "cifar10.1_v6_data.npy", folder / "cifar10.1_v6_labels.npy"
    if case == "float-images":
        np.save(data, np.load(data).astype(np.float32))
    elif case == "channels-first":
        np.save(data, images)
    elif case == "pickled-labels":
        np.save(labels_file, np.array([object()] * 6), allow_pickle=True)
    elif case == "truncated":
        data.write_bytes(data.read_bytes()[:-50])
    elif case == "labels-short":
        np.save(labels_file, labels[:5].astype(np.int32))
    elif case == "bad-label":
        np.save(labels_file, np.full(6, 12, np.int32))
    code, _, err = cli(capsys, "data", "import", "cifar10.1", str(folder), "--unofficial")
    assert_one_line(code, err, needle)
    assert nothing_staged("cifar10.1")


@pytest.mark.parametrize("case, needle", [
    ("truncated", "not a readable"),
    ("stray-file", "not an ImageNetV2 image"),
    ("class-too-high", "not an ImageNetV2 image"),
    ("not-a-jpeg", "not a decodable JPEG"),
    ("link", "not an ImageNetV2 image"),
])
def test_imagenetv2_archives_of_another_format_are_refused_in_one_line(tmp_path, capsys, case, needle):
    from runner.tasks.imagenet.imagenetv2 import ARCHIVE, TOP

    folder, _, _ = standin(tmp_path, "imagenetv2", n=4)
    archive = folder / ARCHIVE

    def add(name: str, payload: bytes = b"", kind=tarfile.REGTYPE) -> None:
        import io

        with tarfile.open(archive, "r:gz") as tar:
            members = [(m, tar.extractfile(m).read()) for m in tar.getmembers()]
        with tarfile.open(archive, "w:gz") as tar:
            for member, raw in members:
                tar.addfile(member, io.BytesIO(raw))
            info = tarfile.TarInfo(name)
            info.type = kind
            if kind == tarfile.SYMTYPE:
                info.linkname = "/etc/passwd"
            else:
                info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))

    if case == "truncated":
        archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    elif case == "stray-file":
        add(f"{TOP}/README.txt", b"hello")
    elif case == "class-too-high":
        add(f"{TOP}/1000/0.jpeg", b"\xff\xd8")
    elif case == "not-a-jpeg":
        add(f"{TOP}/5/9.jpeg", b"not a jpeg at all")
    elif case == "link":
        add(f"{TOP}/5/link.jpeg", kind=tarfile.SYMTYPE)
    code, _, err = cli(capsys, "data", "import", "imagenetv2", str(archive), "--unofficial")
    assert_one_line(code, err, needle)
    assert nothing_staged("imagenetv2")


def test_a_second_test_set_not_imported_says_how_to_import_it():
    with pytest.raises(UserError) as err:
        extra_sets.staged_extra("cifar10.1")
    assert "runner data import cifar10.1 FOLDER" in str(err.value) and "cifar10.1_v6_data.npy" in str(err.value)


# -- the study's statistics ---------------------------------------------------------------------

def test_wilson_and_newcombe_intervals_match_the_published_examples():
    # Newcombe (1998), table II, example (a): 56/70 against 48/80, method 10: 0.0524 to 0.3339.
    d, low, high = newcombe(56, 70, 48, 80)
    assert d == pytest.approx(0.2) and low == pytest.approx(0.0524, abs=1e-4) and high == pytest.approx(0.3339, abs=1e-4)
    # Wilson for 81 of 263 (Newcombe 1998a, table I: 0.2553 to 0.3662); none of 10 stays inside [0, 1].
    assert wilson(81, 263) == pytest.approx((0.2553, 0.3662), abs=1e-4)
    assert wilson(0, 10)[0] == 0.0 and wilson(10, 10)[1] == pytest.approx(1.0)
    # Paired: 10 items, 3 right only by the first, 1 only by the second.
    first = [True] * 3 + [False] + [True] * 6
    second = [False] * 3 + [True] + [True] * 6
    d, low, high = paired(first, second)
    assert d == pytest.approx(0.2) and low < 0.2 < high


def test_the_linear_head_learns_what_the_features_hold():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, 600)
    informative = rng.normal(size=(600, 8)) + np.eye(4, 8)[labels] * 3
    noise = rng.normal(size=(600, 8))
    for features, floor, ceiling in ((informative, 0.9, 1.0), (noise, 0.0, 0.5)):
        head = train_head(features[:400], labels[:400], 4)
        accuracy = float(np.mean(head.predict(features[400:]) == labels[400:]))
        assert floor <= accuracy <= ceiling


@pytest.mark.parametrize("text, fix", [("LeNet=99", "NAME=ORIG,NEW"), ("=99,98", "NAME=ORIG,NEW"),
                                       ("LeNet=99,abc", "NAME=ORIG,NEW"), ("LeNet=99,101", "NAME=ORIG,NEW")])
def test_a_reference_given_as_scores_is_parsed_in_percent(text, fix):
    assert parse_reference("LeNet-5=99.05,98.6")["gap"]["points"] == pytest.approx(0.0045)
    assert parse_reference("some/run/folder") is None
    with pytest.raises(UserError, match=fix):
        parse_reference(text)


GOOD_RECORD = {"layer": "head.4", "dim": 3, "torch": "2.13.0+cpu"}


@pytest.mark.parametrize("forge", [
    lambda r: r.update(dim=0), lambda r: r.update(dim=transfer.MAX_WIDTH + 1), lambda r: r.update(dim=3.0),
    lambda r: r.update(dim=True), lambda r: r.update(layer="head.4\n\x1b[31m"), lambda r: r.update(layer=""),
    lambda r: r.update(torch="[link=file:///etc]x[/link]"), lambda r: r.pop("layer"),
])
def test_a_forged_features_record_is_refused(forge):
    assert transfer.parse_record(json.dumps(GOOD_RECORD)) == GOOD_RECORD
    record = dict(GOOD_RECORD)
    forge(record)
    with pytest.raises(transfer.FeatureError):
        transfer.parse_record(json.dumps(record))


def test_features_are_read_only_as_the_arrays_asked_for(tmp_path):
    np.save(tmp_path / "trained-eval.npy", np.ones((5, 3), np.float32))
    assert transfer.read_features(tmp_path, "trained", "eval", 5, 3).shape == (5, 3)
    for array, needle in ((np.ones((4, 3), np.float32), "not float 5 x 3"), (np.ones((5, 4), np.float32), "not float"),
                          (np.full((5, 3), np.nan, np.float32), "not finite"), (np.ones((5, 3), np.int64), "not float")):
        np.save(tmp_path / "trained-eval.npy", array)
        with pytest.raises(transfer.FeatureError, match=needle):
            transfer.read_features(tmp_path, "trained", "eval", 5, 3)
    (tmp_path / "trained-eval.npy").unlink()
    (tmp_path / "trained-eval.npy").symlink_to(tmp_path / "elsewhere.npy")  # a link to a host file
    with pytest.raises(transfer.FeatureError, match="not a regular file"):
        transfer.read_features(tmp_path, "trained", "eval", 5, 3)
    (tmp_path / "trained-eval.npy").unlink()
    os.mkfifo(tmp_path / "trained-eval.npy")  # no writer: a blocking read would hang
    with pytest.raises(transfer.FeatureError, match="not a regular file"):
        transfer.read_features(tmp_path, "trained", "eval", 5, 3)
    # A header claiming more than the items and width asked for is refused before any read.
    with open(tmp_path / "random-eval.npy", "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<f4", "fortran_order": False, "shape": (10**9, 3)})
    with pytest.raises(transfer.FeatureError, match="limit"):
        transfer.read_features(tmp_path, "random", "eval", 5, 3)
