"""Making, packing and safely opening result bundles."""

from __future__ import annotations

import gzip
import io
import json
import os
import tarfile
from pathlib import Path

import pytest
from securesystemslib.signer import CryptoSigner
from synthetic_result import make_result_folder, stage_mnist_stand_in

from runner.bundle import (
    PREDICATE_TYPE,
    Limits,
    UnsafeBundleError,
    make_bundle,
    open_bundle,
    pack,
)
from runner.bundle.claim import build_predicate
from runner.results.record import Result
from runner.bundle.filelist import (
    ENVELOPE,
    SIGNER_KEY,
    file_digests,
    read_manifest,
    sha256_file,
)
from runner.bundle.signing import PAYLOAD_TYPE, read_envelope
from runner.bundle.statement import build_statement, serialize, subjects
from runner import paths
from runner.errors import UserError
from runner.fingerprint import capture_host


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    return stage_mnist_stand_in(tmp_path_factory.mktemp("home"))


@pytest.fixture(scope="module")
def fingerprint():
    return capture_host()


@pytest.fixture
def result_dir(tmp_path, staged, fingerprint):
    return make_result_folder(tmp_path / "20261122T010203Z-s0-abc123", staged, fingerprint)


@pytest.fixture(scope="module")
def signer():
    return CryptoSigner.generate_ed25519()


def test_manifest_lists_every_file_with_its_sha256(result_dir):
    bundle = make_bundle(result_dir)
    listed = read_manifest(result_dir)
    on_disk = sorted(
        p.relative_to(result_dir).as_posix() for p in result_dir.rglob("*")
        if p.is_file() and not p.relative_to(result_dir).as_posix().startswith("bundle/")
    )
    assert sorted(listed) == on_disk
    assert {"result.json", "events.jsonl", "profile.yaml", "output/model/weights.pt",
            "inference/torch/latencies_ns.npy"} <= set(listed)
    for rel, digest in listed.items():
        assert sha256_file(result_dir / rel) == digest
    assert bundle.files == listed


def test_unsigned_bundle_says_so(result_dir):
    bundle = make_bundle(result_dir, signer=None)
    assert not bundle.signed
    assert not (result_dir / ENVELOPE).exists()
    assert any("NOT signed" in w for w in bundle.warnings)


def test_signed_statement_covers_every_file_and_holds_the_claim(result_dir, signer):
    bundle = make_bundle(result_dir, signer)
    envelope = read_envelope(result_dir / ENVELOPE)
    assert envelope.payload_type == PAYLOAD_TYPE
    envelope.verify([signer.public_key], 1)
    statement = json.loads(envelope.payload)
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["predicateType"] == PREDICATE_TYPE
    assert {s["name"]: s["digest"]["sha256"] for s in statement["subject"]} == read_manifest(result_dir)
    result = json.loads((result_dir / "result.json").read_text())
    predicate = statement["predicate"]
    assert predicate == json.loads(json.dumps(build_predicate(Result.from_dict(result), bundle.files)))
    assert predicate["training"]["tta_seconds"] == result["training"]["tta_seconds"]
    assert predicate["inference"]["torch"]["latency_ms"] == result["inference"]["torch"]["latency_ms"]
    assert predicate["digests"]["data"] == result["data"]["digest"]
    assert predicate["digests"]["fingerprint"] == sha256_file(result_dir / "fingerprint.json")
    assert predicate["run_ids"] == [result_dir.name]
    assert json.loads((result_dir / SIGNER_KEY).read_text())["keyid"] == signer.public_key.keyid


def _hand_built(digests: dict[str, str], predicate_type: str, predicate: dict) -> dict:
    """The Statement as the runner built it by hand before in-toto's bindings built it."""
    return {"_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": name, "digest": {"sha256": d}} for name, d in sorted(digests.items())],
            "predicateType": predicate_type, "predicate": predicate}


def test_the_statement_is_built_by_in_totos_bindings_as_the_same_json(result_dir, signer):
    """in_toto_attestation.v1 makes the Statement; the signed bytes are those of the hand-built one."""
    bundle = make_bundle(result_dir, signer)
    predicate = build_predicate(Result.read(result_dir), bundle.files)
    assert read_envelope(result_dir / ENVELOPE).payload == serialize(_hand_built(bundle.files, PREDICATE_TYPE, predicate))
    big = {"version": 1, "seed": 0, "count": 12345678901234567, "scores": [1, 2.5], "none": None}
    assert serialize(build_statement({"a": "0" * 64}, PREDICATE_TYPE, big)) == serialize(
        _hand_built({"a": "0" * 64}, PREDICATE_TYPE, big))  # integers stay integers (a protobuf Struct would not)


@pytest.mark.parametrize("digests, predicate, problem", [
    ({}, {"version": 1}, "subject"),
    ({"result.json": "0" * 64}, {}, "Predicate"),
])
def test_in_totos_validation_refuses_a_statement_it_would_not_accept(digests, predicate, problem):
    with pytest.raises(ValueError, match=problem):
        build_statement(digests, PREDICATE_TYPE, predicate)


def test_every_archived_statement_is_rebuilt_byte_for_byte():
    """Old bundles' payloads are what they are: built again from their own subjects and
    predicate, each is the same bytes."""
    archives = sorted((paths.repo_root() / "results" / "archive").glob("*.tar.gz"))
    assert archives
    for archive in archives:
        with open_bundle(archive, Limits()) as opened:
            payload = read_envelope(opened.root / ENVELOPE).payload
            statement = json.loads(payload)
            again = build_statement(subjects(statement), statement["predicateType"], statement["predicate"])
            assert serialize(again) == payload, archive.name


def test_rebundling_after_a_change_updates_the_digests(result_dir, signer):
    make_bundle(result_dir, signer)
    (result_dir / "logs" / "train.log").write_text("changed\n")
    make_bundle(result_dir, signer)
    assert read_manifest(result_dir)["logs/train.log"] == sha256_file(result_dir / "logs" / "train.log")


def test_pack_is_byte_identical_and_normalised(result_dir, signer, tmp_path, monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    make_bundle(result_dir, signer)
    first = pack(result_dir, tmp_path / "a.tar.gz")
    # Different file times and permissions must not change a byte.
    for p in result_dir.rglob("*"):
        if p.is_file():
            os.utime(p, (1_700_000_000, 1_700_000_000))
    (result_dir / "curve.tsv").chmod(0o600)
    second = pack(result_dir, tmp_path / "b.tar.gz")
    assert first.read_bytes() == second.read_bytes()

    raw = first.read_bytes()
    assert raw[:2] == b"\x1f\x8b"
    assert raw[3] & 0x08 == 0  # no FNAME field in the gzip header
    assert int.from_bytes(raw[4:8], "little") == 0  # gzip mtime 0
    with tarfile.open(first, "r:gz") as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert all(n.startswith(result_dir.name + "/") for n in names)
    assert f"{result_dir.name}/{ENVELOPE}" in names
    for m in members:
        assert (m.uid, m.gid, m.uname, m.gname, m.mtime, m.mode) == (0, 0, "", "", 0, 0o644)
        assert m.isreg() and not m.pax_headers
    with gzip.open(first) as fh:
        assert b"ustar  \x00" in fh.read(512)  # GNU tar magic, not POSIX pax


def test_source_date_epoch_sets_member_times(result_dir, tmp_path, monkeypatch):
    make_bundle(result_dir)
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    with tarfile.open(pack(result_dir, tmp_path / "x.tar.gz")) as tar:
        assert {m.mtime for m in tar.getmembers()} == {1_700_000_000}


def test_pack_refuses_a_folder_that_is_not_a_bundle(result_dir, tmp_path):
    with pytest.raises(UserError, match="not a bundle"):
        pack(result_dir, tmp_path / "x.tar.gz")


def test_pack_refuses_symbolic_links(result_dir, tmp_path):
    make_bundle(result_dir)
    (result_dir / "link").symlink_to("/etc/passwd")
    with pytest.raises(UserError, match="symbolic link"):
        pack(result_dir, tmp_path / "x.tar.gz")


def test_open_round_trips_a_packed_bundle(result_dir, signer, tmp_path):
    make_bundle(result_dir, signer)
    archive = pack(result_dir, tmp_path / "b.tar.gz")
    with open_bundle(archive) as opened:
        assert opened.root.name == result_dir.name
        assert file_digests(opened.root) == file_digests(result_dir)
        assert (opened.root / ENVELOPE).read_bytes() == (result_dir / ENVELOPE).read_bytes()
        root = opened.root
    assert not root.exists()  # the private copy is removed on close


def test_open_copies_a_folder(result_dir):
    make_bundle(result_dir)
    with open_bundle(result_dir) as opened:
        assert opened.root != result_dir
        assert file_digests(opened.root) == file_digests(result_dir)


def _tar(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w:gz", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            if data is not None:
                info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def _file(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


def _special(name: str, kind: bytes, link: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = link
    return info, None


@pytest.mark.parametrize(
    "members, problem",
    [
        ([_file("run/result.json"), _file("/etc/cron.d/evil")], "absolute path"),
        ([_file("run/result.json"), _file("run/../../evil")], r"'\.\.'"),
        ([_file("run/result.json"), _special("run/output/link", tarfile.SYMTYPE, "/etc/passwd")], "is a link"),
        ([_file("run/result.json"), _special("run/output/hard", tarfile.LNKTYPE, "run/result.json")], "is a link"),
        ([_file("run/result.json"), _special("run/dev", tarfile.CHRTYPE)], "special file"),
        ([_file("run/result.json"), _special("run/fifo", tarfile.FIFOTYPE)], "special file"),
        ([_file("run/result.json", b"a"), _file("run/result.json", b"b")], "appears twice"),
    ],
    ids=["absolute", "dotdot", "symlink", "hardlink", "device", "fifo", "duplicate"],
)
def test_open_refuses_unsafe_members(tmp_path, members, problem):
    archive = _tar(tmp_path / "evil.tar.gz", members)
    with pytest.raises(UnsafeBundleError, match=problem):
        open_bundle(archive)
    assert not (tmp_path / "evil").exists()


def test_open_enforces_size_and_count_limits(tmp_path):
    archive = _tar(tmp_path / "many.tar.gz", [_file(f"run/f{i}", b"0123456789") for i in range(20)])
    with pytest.raises(UnsafeBundleError, match="more than 10 files"):
        open_bundle(archive, Limits(max_files=10))
    with pytest.raises(UnsafeBundleError, match="over the 5-byte limit"):
        open_bundle(archive, Limits(max_file_bytes=5))
    with pytest.raises(UnsafeBundleError, match="more than 100 bytes"):
        open_bundle(archive, Limits(max_total_bytes=100))
    with open_bundle(archive) as opened:
        assert len(list(opened.root.iterdir())) == 20


def test_open_refuses_a_zip_bomb(tmp_path):
    archive = _tar(tmp_path / "bomb.tar.gz", [_file("run/zeros", bytes(8 << 20))])
    assert archive.stat().st_size < 64 << 10
    with pytest.raises(UnsafeBundleError, match="zip bomb"):
        open_bundle(archive, Limits(ratio_floor_bytes=1 << 20))


def test_open_refuses_links_in_a_folder(result_dir, tmp_path):
    make_bundle(result_dir)
    (result_dir / "output" / "escape").symlink_to(tmp_path)
    with pytest.raises(UnsafeBundleError, match="symbolic link"):
        open_bundle(result_dir)


def test_open_refuses_what_is_not_a_gzip_tar(tmp_path):
    bogus = tmp_path / "x.tar.gz"
    bogus.write_bytes(b"PK\x03\x04 not a tar")
    with pytest.raises(UnsafeBundleError, match="not a gzip"):
        open_bundle(bogus)
    truncated = tmp_path / "t.tar.gz"
    truncated.write_bytes(gzip.compress(b"\x00" * 100)[:-8])
    with pytest.raises(UnsafeBundleError):
        open_bundle(truncated)


def test_cli_sign_and_pack(result_dir, tmp_path, monkeypatch, capsys):
    from runner import keys
    from runner.bundle import record_measured
    from runner.cli import main

    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(keys.ENV_VAR, raising=False)

    def run(*argv: str) -> int:
        return main(list(argv))

    record_measured(result_dir)  # as the run that wrote it would: the runner signs only what it measured
    assert run("bundle", "sign", str(result_dir)) == 1  # no key: unsigned, and says so
    assert "NOT signed" in capsys.readouterr().out
    keys.generate()
    assert run("bundle", "sign", str(result_dir)) == 0
    assert (result_dir / ENVELOPE).is_file()
    # -o/--out names the folder; the file is <entry>-<run_id>.tar.gz, as in the archive.
    result = json.loads((result_dir / "result.json").read_text())
    name = f"{result['entry']['name']}-{result['run_id']}.tar.gz"
    assert run("bundle", "pack", str(result_dir), "-o", str(tmp_path / "out")) == 0
    assert (tmp_path / "out" / name).is_file()
    assert run("bundle", "pack", str(result_dir)) == 0  # default: beside the result folder
    assert (result_dir.parent / name).read_bytes() == (tmp_path / "out" / name).read_bytes()
    assert run("bundle", "pack", str(result_dir), "--out", str(tmp_path / "x.tar.gz")) == 2  # a file name: refused
    assert "names the folder to write into" in capsys.readouterr().err
    assert not (tmp_path / "x.tar.gz").exists()
