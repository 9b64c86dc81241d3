"""Hostile bundles given to ``runner verify``: arrays whose headers claim terabytes, JSON
nested past the recursion limit, archives that unpack to far more than they weigh. Each
gives a NOT-verified report naming the problem, exit 1, no traceback, nothing written
beyond the limits."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import numpy as np
import pytest
from securesystemslib.signer import CryptoSigner

from runner.bundle import make_bundle, open as bundle_open, pack
from runner.keys import public_key_dict

from hostile_helpers import run_cli, signed_result


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    signer = CryptoSigner.generate_ed25519()
    folder, home = signed_result(tmp_path_factory, "20261122T010203Z-s0-hostile", signer)
    public = home / "trusted.pub.json"
    public.write_text(json.dumps(public_key_dict(signer.public_key)))
    yield folder, public, home


@pytest.fixture
def bundle(signed, tmp_path, monkeypatch):
    folder, public, home = signed
    monkeypatch.setenv("RUNNER_HOME", str(home))
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    return copy


def verify(capsys, signed, path: Path) -> tuple[int, str]:
    code, out, err = run_cli(capsys, "verify", str(path), "--trusted-keys", str(signed[1]))
    assert "Traceback" not in out + err, out + err
    return code, " ".join((out + err).split())  # rich wraps long lines


def terabyte_header(path: Path) -> None:
    with open(path, "wb") as fh:
        np.lib.format.write_array_header_1_0(fh, {"descr": "<i8", "fortran_order": False, "shape": (10**12,)})
        fh.write(b"\0" * 64)


def test_verified_baseline(signed, bundle, capsys):
    assert verify(capsys, signed, bundle)[0] == 0


def test_eight_terabyte_predictions_header(signed, bundle, capsys):
    terabyte_header(bundle / "evaluations" / "1" / "clean.npy")
    code, out = verify(capsys, signed, bundle)
    assert code == 1 and "over the 8589934592-byte limit" in out and "NOT verified" in out


def test_eight_terabyte_inference_header(signed, bundle, capsys):
    terabyte_header(bundle / "inference" / "torch" / "predictions.npy")
    code, out = verify(capsys, signed, bundle)
    assert code == 1 and "NOT verified" in out


def test_pickled_object_array(signed, bundle, capsys):
    np.save(bundle / "evaluations" / "0" / "clean.npy", np.array([{"a": 1}] * 3, dtype=object),
            allow_pickle=True)
    code, out = verify(capsys, signed, bundle)
    assert code == 1 and "not a plain numeric type" in out


def test_oversized_npy_header(signed, bundle, capsys):
    path = bundle / "evaluations" / "0" / "clean.npy"
    header = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), 'pad': '" + "x" * 200_000 + "'}"
    path.write_bytes(b"\x93NUMPY\x02\x00" + len(header).to_bytes(4, "little") + header.encode() + b"\0" * 24)
    code, out = verify(capsys, signed, bundle)
    assert code == 1 and "not a readable .npy" in out


def test_npy_shorter_than_its_header_says(signed, bundle, capsys):
    path = bundle / "evaluations" / "2" / "clean.npy"
    path.write_bytes(path.read_bytes()[:-800])
    code, out = verify(capsys, signed, bundle)
    assert code == 1 and "but the file holds" in out


@pytest.mark.parametrize("line, needle", [
    ('{"key": ' + "[" * 200_000 + "]" * 200_000 + "}", "events.jsonl is malformed"),
    ('{"seq": 0, "t": 1.0, "key": "run_start", "value": ' + "9" * 5000 + "}", "5000 digits"),
    ('{"seq": 0, "t": 1.0, "key": "x", "value": "' + "y" * 5_000_000 + '"}', "longer than"),
    ('{"seq": 0, "t": NaN, "key": "run_start"}', "non-finite"),
])
def test_hostile_events_jsonl(signed, bundle, capsys, line, needle):
    path = bundle / "events.jsonl"
    path.write_text(line + "\n" + path.read_text())
    code, out = verify(capsys, signed, bundle)
    assert code == 1 and needle in out


def test_result_json_nested_past_the_recursion_limit(signed, bundle, capsys):
    (bundle / "result.json").write_text('{"a": ' + "[" * 200_000 + "]" * 200_000 + "}")
    code, out = verify(capsys, signed, bundle)
    assert code == 1 and "NOT verified" in out


def _tar_with(tmp_path: Path, name: str, data: bytes, folder: str = "run") -> Path:
    out = tmp_path / "evil.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        info = tarfile.TarInfo(f"{folder}/{name}")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return out


def test_bomb_member_is_refused_before_a_byte_is_written(signed, tmp_path, capsys, monkeypatch):
    archive = _tar_with(tmp_path, "output/zeros.bin", b"\0" * (100 << 20))  # ~100 KB packed
    written = []
    real = bundle_open._copy_limited
    monkeypatch.setattr(bundle_open, "_copy_limited", lambda *a, **k: (written.append(a[2]), real(*a, **k)))
    code, out = verify(capsys, signed, archive)
    assert code == 1 and "zip bomb" in out and written == []


def test_path_traversal_member(signed, tmp_path, capsys):
    code, out = verify(capsys, signed, _tar_with(tmp_path, "../../etc/evil", b"x"))
    assert code == 1 and "contains '..'" in out and not Path("/etc/evil").exists()


def test_not_a_gzip_file(signed, tmp_path, capsys):
    path = tmp_path / "bundle.tar.gz"
    path.write_bytes(b"PK\x03\x04 a zip file")
    code, out = verify(capsys, signed, path)
    assert code == 1 and "not a gzip file" in out


def test_truncated_archive(signed, bundle, tmp_path, capsys):
    archive = pack(bundle, tmp_path / "b.tar.gz")
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    code, out = verify(capsys, signed, archive)
    assert code == 1 and "not a readable .tar.gz" in out


def test_safe_npy_loads_what_numpy_saves(tmp_path):
    from runner.safe_npy import load_npy

    for array in (np.arange(12, dtype=np.int64).reshape(3, 4), np.asfortranarray(np.ones((2, 5))),
                  np.array([], dtype=np.float32), np.array(True)):
        np.save(tmp_path / "a.npy", array)
        loaded = load_npy(tmp_path / "a.npy")
        assert loaded.dtype == array.dtype and np.array_equal(loaded, array)


def test_alias_bomb_in_the_bundles_profile_is_refused_before_any_check(signed, bundle, capsys):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))
    (bundle / "profile.yaml").write_text(bomb)
    code, out = verify(capsys, signed, bundle)
    assert code == 1 and "anchors and aliases are not allowed" in out and "not run" in out


# --- outputs verify would refuse are never signed (issue 22, item 8) -----------------------

def test_entry_outputs_verify_would_refuse_are_left_out_unread_before_signing(bundle, tmp_path, capsys):
    import os
    import time

    out = bundle / "output"
    with open(out / "sparse.bin", "wb") as fh:
        fh.truncate(100 << 30)  # 100 GiB without a block: hashing it took ~85 s
    os.mkfifo(out / "pipe")  # opening it would block forever
    os.link(out / "model" / "weights.pt", out / "twin.pt")  # verify refuses hard links
    (out / "passwd").symlink_to("/etc/passwd")
    (out / "bomb.yaml").write_text("a: &a [1, 2]\nb: *a\n")  # verify's YAML loader refuses aliases
    signer = CryptoSigner.generate_ed25519()
    public = tmp_path / "signer.pub.json"
    public.write_text(json.dumps(public_key_dict(signer.public_key)))
    started = time.monotonic()
    made = make_bundle(bundle, signer)
    assert time.monotonic() - started < 10
    left_out = ["bomb.yaml", "model/weights.pt", "passwd", "pipe", "sparse.bin", "twin.pt"]
    assert not any((out / name).exists() or (out / name).is_symlink() for name in left_out)
    (note,) = [n for n in json.loads((bundle / "result.json").read_text())["training"]["notes"]
               if n.startswith("left out of the bundle")]
    assert "output/sparse.bin (107374182400 bytes, over the 4294967296-byte limit of one file)" in note
    assert "output/pipe (a FIFO)" in note and "output/twin.pt (hard-linked elsewhere)" in note
    assert made.warnings == [note]
    code, text = verify(capsys, (None, public), bundle)
    assert code == 0, text


def test_a_runner_file_verify_would_refuse_refuses_the_bundle(bundle, tmp_path):
    from runner.errors import UserError

    with open(bundle / "logs" / "huge.log", "wb") as fh:
        fh.truncate(5 << 30)
    with pytest.raises(UserError, match=r"logs/huge.log \(5368709120 bytes, over the 4294967296-byte limit"):
        make_bundle(bundle, CryptoSigner.generate_ed25519())
    assert not (bundle / "bundle" / "statement.dsse.json").exists()  # nothing signed, not even the old state
    assert (bundle / "logs" / "huge.log").exists()  # the runner's own files are never dropped


def test_over_the_count_or_total_the_largest_outputs_go_first(bundle):
    from runner.bundle.filelist import unverifiable
    from runner.bundle.open import Limits

    for i in range(5):
        (bundle / "output" / f"{i}.bin").write_bytes(b"x" * (1000 * (i + 1)))
    files = sum(1 for p in bundle.rglob("*") if p.is_file() and p.parent.name != "bundle")
    refused = unverifiable(bundle, Limits(max_files=files - 2 + 3))  # room for all but two (and the bookkeeping)
    assert [r.path for r in refused] == ["output/4.bin", "output/model/weights.pt"]
