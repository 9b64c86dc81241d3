"""Declared public inputs (GloVe for SQuAD): pinned by their published digests, imported once,
checked by each run, refused when not the official files, and recorded in the result."""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

from runner.cli import main
from runner.data import public_inputs as pi
from runner.errors import UserError
from runner.manifest import load_entry
from runner.tasks import PublicInput, get_task, public_input

SQUAD_READER = Path(__file__).parent / "entries" / "squad-reader"


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _sha1(data: bytes) -> str:
    return hashlib.sha1(data).hexdigest()


@pytest.fixture
def vectors(tmp_path, monkeypatch):
    """A stand-in published artifact: a zip of one word-vector file, pinned by its own digests
    (the real pins are GloVe's, which no test can hold)."""
    text = b"the 0.1 0.2 0.3\nof -0.4 0.5 0.6\n"
    archive = tmp_path / "vectors.3d.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("vectors.3d/vectors.3d.txt", text)
    item = PublicInput("vectors.3d", "test vectors", "vectors.3d.zip", _sha1(archive.read_bytes()),
                       (("vectors.3d.txt", _sha1(text)),), "https://example.org/vectors.3d.zip", "the test")
    monkeypatch.setattr(pi, "public_input", lambda name: item)
    return archive, text


def test_the_glove_pins_are_the_published_sha1_digests():
    glove = public_input("glove.840B.300d")
    assert glove.archive_sha1 == "8084fbacc2dee3b1fd1ca4cc534cbfff3519ed0d"
    assert dict(glove.files) == {"glove.840B.300d.txt": "294b9f37fa64cce31f9ebb409c266fc379527708"}
    assert len(public_input("glove.6B").files) == 4
    assert {i.name for i in get_task("squad-v1.1").public_inputs} == {"glove.840B.300d", "glove.6B"}


def test_an_import_checks_every_digest_and_records_sha256(home, vectors):
    archive, text = vectors
    staged = pi.import_input("vectors.3d", archive)
    assert (staged.folder / "vectors.3d.txt").read_bytes() == text
    record = staged.record()
    assert record == {"name": "vectors.3d", "synthetic": False,
                      "files": {"vectors.3d.txt": {"sha256": hashlib.sha256(text).hexdigest(), "bytes": len(text)}}}
    assert pi.check_input("vectors.3d").files == staged.files


def test_files_unpacked_by_hand_import_like_the_archive(home, vectors, tmp_path):
    _, text = vectors
    folder = tmp_path / "unpacked"
    folder.mkdir()
    (folder / "vectors.3d.txt").write_bytes(text)
    assert pi.import_input("vectors.3d", folder).files["vectors.3d.txt"]["bytes"] == len(text)


def test_a_file_that_is_not_the_official_one_is_refused_and_the_earlier_import_kept(home, vectors, tmp_path):
    archive, text = vectors
    pi.import_input("vectors.3d", archive)
    forged = tmp_path / "forged"
    forged.mkdir()
    (forged / "vectors.3d.txt").write_bytes(text.replace(b"0.1", b"0.9"))
    with pytest.raises(UserError) as caught:
        pi.import_input("vectors.3d", forged)
    assert "is not the official file: its SHA-1 is" in caught.value.problem
    assert "runner data import vectors.3d" in caught.value.fix
    assert (pi.staged_input("vectors.3d").folder / "vectors.3d.txt").read_bytes() == text  # kept


def test_a_changed_file_is_found_by_the_runs_check(home, vectors):
    archive, _ = vectors
    staged = pi.import_input("vectors.3d", archive)
    path = staged.folder / "vectors.3d.txt"
    path.chmod(0o644)
    path.write_bytes(b"the 9 9 9\n")
    with pytest.raises(UserError, match="vectors.3d.txt changed since it was imported"):
        pi.staged_input("vectors.3d")


def test_the_real_pins_refuse_an_archive_that_is_not_glove(home, tmp_path, capsys):
    fake = tmp_path / "glove.6B.zip"
    with zipfile.ZipFile(fake, "w") as z:
        z.writestr("glove.6B.50d.txt", "the 0.1\n")
    assert main(["data", "import", "glove.6B", str(fake)]) == 2
    err = capsys.readouterr().err
    assert "is not the official glove.6B.zip: its SHA-1 is" in err and "b64e54f1877d2f735bdd000c1d7d771e25c7dfdc" in err
    assert "Traceback" not in err


def test_a_run_without_the_import_is_refused_with_the_fix(home):
    with pytest.raises(UserError) as caught:
        pi.for_run(get_task("squad-v1.1"), ["glove.840B.300d"], smoke=False, scratch=home)
    assert caught.value.problem == "public input glove.840B.300d is not imported"
    assert "runner data import glove.840B.300d" in caught.value.fix


def test_a_smoke_run_gets_synthetic_vectors_for_its_words(tmp_path):
    (staged,) = pi.for_run(get_task("squad-v1.1"), ["glove.840B.300d"], smoke=True, scratch=tmp_path,
                           words=["Paris", "the", ","])
    lines = (staged.folder / "glove.840B.300d.txt").read_text().splitlines()
    assert sorted(line.split(" ")[0] for line in lines) == [",", "Paris", "the"]
    assert all(len(line.split(" ")) == 301 for line in lines)
    assert staged.record()["synthetic"] is True


def _entry_with(tmp_path: Path, public: list[str]) -> Path:
    folder = tmp_path / "squad-reader"
    shutil.copytree(SQUAD_READER, folder)
    manifest = yaml.safe_load((folder / "entry.yaml").read_text())
    (folder / "entry.yaml").write_text(yaml.safe_dump({**manifest, "public_inputs": public}))
    return folder


def test_a_manifest_may_declare_only_its_tasks_public_inputs(tmp_path):
    assert load_entry(_entry_with(tmp_path / "a", ["glove.840B.300d"])).public_inputs == ("glove.840B.300d",)
    with pytest.raises(UserError) as caught:
        load_entry(_entry_with(tmp_path / "b", ["resnet50-imagenet-weights"]))
    assert "which task squad-v1.1 does not declare" in caught.value.problem
    assert caught.value.fix == "use only glove.6B, glove.840B.300d"
