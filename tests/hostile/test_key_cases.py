"""Hostile keys, key folders, ledgers and run folders (issue 46, keys and verify's own reads).

Every key file, key folder (``--trusted-keys``, ``results/archive/keys/``, ``runner keys trust
FOLDER``), trust-store entry, ledger and signed statement is read through ``runner.safe_read``:
a FIFO never blocks, a sparse giant is refused by its size, JSON nested deep or holding NaN is
refused, a link in a key folder is never followed. A command that cannot go on exits 2 with
one line naming the file and why; in a folder of keys, a key that cannot be read is skipped
with a one-line warning naming it and the others are still used. Nothing is deleted.

Cases that could hang on the code before run the CLI in a subprocess with a time-out."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from securesystemslib.signer import CryptoSigner

from runner import keys
from runner.bundle import make_bundle
from runner.bundle.filelist import ENVELOPE
from runner.keys.ledger import ledger_path
from hostile_helpers import assert_one_line_error, run_cli, signed_result

REPO = Path(__file__).resolve().parents[2]
ENTRY = "mnist-cnn-cpu"
RUN = "20261122T010203Z-s0-keycase"
GIB = 1 << 30


@pytest.fixture(scope="module")
def signed(tmp_path_factory):
    """A verified synthetic run signed by a key whose public half is in ``keys/`` (a folder of
    keys, as ``results/archive/keys/``), and the RUNNER_HOME it was staged in."""
    signer = CryptoSigner.generate_ed25519()
    folder, home = signed_result(tmp_path_factory, RUN, signer)
    folder_of_keys = home / "keys-folder"
    folder_of_keys.mkdir()
    (folder_of_keys / "publisher.pub.json").write_text(keys.public_key_json(signer.public_key))
    return folder, folder_of_keys, home, signer


@pytest.fixture
def case(signed, tmp_path, monkeypatch):
    """A copy of the signed run under ``results/<entry>/`` with the publisher's key in
    ``results/archive/keys/``, and RUNNER_HOME the staged one (no trust store, no own key)."""
    folder, folder_of_keys, home, _ = signed
    monkeypatch.setenv("RUNNER_HOME", str(home))
    monkeypatch.delenv(keys.ENV_VAR, raising=False)
    monkeypatch.delenv(keys.PUBKEY_ENV_VAR, raising=False)
    results = tmp_path / "results"
    run = results / ENTRY / folder.name
    shutil.copytree(folder, run)
    archive_keys = results / "archive" / "keys"
    shutil.copytree(folder_of_keys, archive_keys)
    return run, archive_keys, results


def cli(*argv: str, env: dict | None = None, timeout: float = 30) -> tuple[int, str, str, float]:
    """``runner ARGV`` in a subprocess (a case that hung before must not hang the suite):
    (exit code, stdout, stderr, seconds); a time-out is exit code -1."""
    started = time.monotonic()
    environment = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", **(env or {})}
    try:
        done = subprocess.run([sys.executable, "-m", "runner", *argv], capture_output=True, text=True,
                              timeout=timeout, env=environment, cwd=REPO)
    except subprocess.TimeoutExpired as exc:
        return -1, str(exc.stdout or ""), str(exc.stderr or "") + "\n(timed out)", time.monotonic() - started
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def sparse(path: Path, size: int = 4 * GIB) -> Path:
    with open(path, "wb") as fh:
        fh.truncate(size)
    return path


def fifo(path: Path, mode: int = 0o600) -> Path:
    os.mkfifo(path, mode)
    return path


def deep_json(levels: int = 200_000) -> str:
    return "[" * levels + "]" * levels


def trusted_of(out: str) -> bool:
    (row,) = json.loads(out)["runs"]
    return row["verified"]


def warnings_of(err: str) -> list[str]:
    assert "Traceback" not in err, err
    return [line for line in err.splitlines() if line.strip()]


# -- a FIFO where a key should be ------------------------------------------------------------


def test_fifo_signing_key_refuses_bundle_sign(signed, tmp_path):
    """``runner bundle sign`` with a FIFO ``signing.key``: blocked for ever before; now one line."""
    folder, _, home, _ = signed
    own_home = tmp_path / "home"
    shutil.copytree(home, own_home)
    (own_home / "keys").mkdir(mode=0o700)
    fifo(own_home / "keys" / "signing.key")
    run = tmp_path / folder.name
    shutil.copytree(folder, run)
    code, out, err, took = cli("bundle", "sign", str(run), env={"RUNNER_HOME": str(own_home)}, timeout=20)
    assert code == 2 and took < 10, (code, out, err)
    assert_one_line_error(code, "", err, "signing.key", "FIFO")
    assert (run / "result.json").is_file() and (own_home / "keys" / "signing.key").exists()  # nothing deleted


def test_fifo_among_trusted_keys_is_skipped_by_verify(case):
    """A FIFO in the ``--trusted-keys`` folder blocked ``runner verify`` for ever; now it is
    skipped with a warning naming it and the other keys still verify the run."""
    run, archive_keys, _ = case
    fifo(archive_keys / "blocker.pub.json")
    code, out, err, took = cli("verify", str(run), "--trusted-keys", str(archive_keys), "--json", timeout=30)
    assert code == 0 and took < 20, (code, out, err)
    (line,) = warnings_of(err)
    assert "warning" in line and "blocker.pub.json" in line and "FIFO" in line and "skipped" in line
    (check,) = [c for c in json.loads(out)["checks"] if c["name"] == "trusted-key"]
    assert check["ok"], check


def test_fifo_given_as_the_trusted_key_is_one_line(case, tmp_path):
    code, out, err, took = cli("verify", str(case[0]), "--trusted-keys", str(fifo(tmp_path / "k.pub.json")), timeout=20)
    assert took < 10
    assert_one_line_error(code, out, err, "k.pub.json", "FIFO")


def test_fifo_in_the_archive_keys_does_not_block_ls(case):
    """``runner ls --trusted-keys results/archive/keys`` with a FIFO there blocked for ever."""
    run, archive_keys, results = case
    fifo(archive_keys / "zz.pub.json")
    code, out, err, took = cli("ls", "--results", str(results), "--trusted-keys", str(archive_keys), "--json",
                               timeout=30)
    assert code == 0 and took < 20, (code, out, err)
    assert trusted_of(out)
    (line,) = warnings_of(err)
    assert "zz.pub.json" in line and "FIFO" in line


def test_fifo_in_the_trust_store_is_one_line(case, tmp_path):
    store = tmp_path / "home" / "trusted-keys"
    store.mkdir(parents=True)
    fifo(store / ("0" * 64 + ".pub.json"))
    code, out, err, took = cli("keys", "list", env={"RUNNER_HOME": str(tmp_path / "home")}, timeout=20)
    assert took < 10
    assert_one_line_error(code, out, err, "trust store", "FIFO", "runner keys untrust")


def test_keys_trust_a_folder_skips_a_fifo_and_trusts_the_others(case, tmp_path):
    _, archive_keys, _ = case
    fifo(archive_keys / "blocker.pub.json")
    code, out, err, took = cli("keys", "trust", str(archive_keys), env={"RUNNER_HOME": str(tmp_path / "home")},
                               timeout=20)
    assert code == 0 and took < 10, (code, out, err)
    assert "trusted" in out and "blocker.pub.json" in " ".join(warnings_of(err))
    assert len(list((tmp_path / "home" / "trusted-keys").glob("*.pub.json"))) == 1
    assert (archive_keys / "blocker.pub.json").exists()  # nothing deleted


def test_fifo_ledger_given_to_verify_is_one_line(case, tmp_path):
    code, out, err, took = cli("verify", str(case[0]), "--ledger", str(fifo(tmp_path / "k.jsonl")), timeout=20)
    assert took < 10
    assert_one_line_error(code, out, err, "k.jsonl", "FIFO")


def test_fifo_ledger_of_your_own_key_does_not_block_ls(signed, case, tmp_path, monkeypatch):
    """``runner ls`` reads the ledger on this host of each key whose runs it lists
    (``made_here``): a FIFO there blocked it for ever."""
    run, archive_keys, results = case
    home = tmp_path / "home"
    shutil.copytree(os.environ["RUNNER_HOME"], home)
    monkeypatch.setenv("RUNNER_HOME", str(home))
    signer = signed[3]
    make_bundle(run, signer, ledger=True)  # the run records its place in the key's ledger
    ledger = ledger_path(signer.public_key.keyid)
    ledger.unlink()
    fifo(ledger)
    code, out, err, took = cli("ls", "--results", str(results), "--trusted-keys", str(archive_keys),
                               env={"RUNNER_HOME": str(home)}, timeout=20)
    assert code == 0 and took < 10, (code, out, err)
    assert "s0-keycase" in out and ledger.exists()


# -- a sparse giant, not UTF-8, not a key, nested deep ----------------------------------------


def test_sparse_four_gib_key_is_refused_by_its_size(case, tmp_path, capsys):
    started = time.monotonic()
    result = run_cli(capsys, "verify", str(case[0]), "--trusted-keys", str(sparse(tmp_path / "big.pub.json")))
    assert time.monotonic() - started < 5
    assert_one_line_error(*result, "big.pub.json", "4.0 GiB", "64.0 KiB")


def test_sparse_signing_key_is_refused_by_its_size(signed, tmp_path):
    folder, _, home, _ = signed
    own_home = tmp_path / "home"
    shutil.copytree(home, own_home)
    (own_home / "keys").mkdir(mode=0o700)
    key = sparse(own_home / "keys" / "signing.key")
    key.chmod(0o600)
    run = tmp_path / folder.name
    shutil.copytree(folder, run)
    code, out, err, took = cli("bundle", "sign", str(run), env={"RUNNER_HOME": str(own_home)}, timeout=30)
    assert took < 5, took
    assert_one_line_error(code, out, err, "signing.key", "4.0 GiB")
    assert key.stat().st_size == 4 * GIB  # nothing deleted


@pytest.mark.parametrize("name, content, why", [
    ("latin1.pub.json", "{\"keytype\": \"ed25519\", \"x\": \"caf\xe9\"}".encode("latin-1"), "not UTF-8"),
    ("deep.pub.json", deep_json(20_000).encode(), "nested deeper"),
    ("nan.pub.json", b'{"keytype": NaN}', "NaN"),
    ("list.pub.json", b"[1, 2, 3]", "not a public key"),
    ("notakey.pub.json", b'{"keytype": "rsa", "scheme": "rsa", "keyval": {"public": "00"}}', "not a public key"),
])
def test_a_bad_key_in_a_folder_of_keys_is_skipped_with_a_warning(case, capsys, name, content, why):
    """The other keys are still used: the run stays verified; the bad one is named."""
    run, archive_keys, results = case
    (archive_keys / name).write_bytes(content)
    started = time.monotonic()
    code, out, err = run_cli(capsys, "ls", "--results", str(results), "--trusted-keys", str(archive_keys), "--json")
    assert code == 0 and time.monotonic() - started < 5, (code, err)
    assert trusted_of(out)
    (line,) = warnings_of(err)
    assert name in line and why in line and "skipped" in line, line


@pytest.mark.parametrize("content, why", [
    ("caf\xe9".encode("latin-1"), "not UTF-8"),
    (deep_json(20_000).encode(), "nested deeper"),
    (b"\x1b]0;owned\x07{}", "not JSON"),
])
def test_a_bad_key_given_alone_is_one_line(case, tmp_path, capsys, content, why):
    path = tmp_path / "given.pub.json"
    path.write_bytes(content)
    line = assert_one_line_error(*run_cli(capsys, "verify", str(case[0]), "--trusted-keys", str(path)),
                                 "given.pub.json", why)
    assert "\x1b" not in line and "\x07" not in line


def test_a_folder_of_keys_with_no_usable_key_is_one_line(case, tmp_path, capsys):
    folder = tmp_path / "bad-keys"
    folder.mkdir()
    (folder / "a.pub.json").write_bytes(deep_json().encode())
    code, out, err = run_cli(capsys, "verify", str(case[0]), "--trusted-keys", str(folder))
    assert code == 2 and "Traceback" not in err
    assert "a.pub.json" in err and "no usable" in err.splitlines()[-1]


# -- links in a key folder ---------------------------------------------------------------------


def test_a_link_in_a_key_folder_leading_outside_is_not_followed(case, tmp_path, capsys):
    """The publisher's key, reached by a link out of the folder, is not trusted through it."""
    run, archive_keys, results = case
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (archive_keys / "publisher.pub.json").rename(outside / "publisher.pub.json")
    (archive_keys / "publisher.pub.json").symlink_to(outside / "publisher.pub.json")
    keys.generate(tmp_path / "other")  # the folder's other key: not the signer's
    shutil.copy(tmp_path / "other" / "signing.pub.json", archive_keys / "other.pub.json")
    code, out, err = run_cli(capsys, "ls", "--results", str(results), "--trusted-keys", str(archive_keys), "--json")
    assert code == 0 and not trusted_of(out)
    (line,) = warnings_of(err)
    assert "publisher.pub.json" in line and "link" in line
    assert (outside / "publisher.pub.json").is_file()


def test_a_link_in_the_trust_store_is_refused(case, tmp_path, capsys, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("RUNNER_HOME", str(home))
    pair = keys.generate(tmp_path / "other")
    store = home / "trusted-keys"
    store.mkdir(parents=True)
    (store / f"{pair.keyid}.pub.json").symlink_to(pair.public)
    assert_one_line_error(*run_cli(capsys, "keys", "list"), f"{pair.keyid}.pub.json", "link")


# -- advice that names what is wrong -----------------------------------------------------------


def test_a_signing_key_that_is_a_folder_is_not_told_to_chmod_600(case, tmp_path, capsys, monkeypatch):
    folder = tmp_path / "keyfolder"
    pair = keys.generate(folder)
    folder.chmod(0o755)
    monkeypatch.setenv(keys.ENV_VAR, str(folder))
    line = assert_one_line_error(*run_cli(capsys, "bundle", "sign", str(case[0])), str(folder), "folder")
    assert "chmod 600" not in line and str(pair.private) in line


def test_a_key_folder_others_can_write_is_told_chmod_700(case, tmp_path, capsys, monkeypatch):
    """The fix names the folder and 700; a private key file others can read is still told
    ``chmod 600`` on the file itself."""
    folder = tmp_path / "keyfolder"
    pair = keys.generate(folder)
    folder.chmod(0o777)
    monkeypatch.setenv(keys.ENV_VAR, str(pair.private))
    line = assert_one_line_error(*run_cli(capsys, "bundle", "sign", str(case[0])), str(folder))
    assert f"chmod 700 {folder}" in line and "chmod 600" not in line
    folder.chmod(0o700)
    pair.private.chmod(0o644)
    line = assert_one_line_error(*run_cli(capsys, "bundle", "sign", str(case[0])), str(pair.private))
    assert f"chmod 600 {pair.private}'" in line
    assert pair.private.is_file()


# -- verify on a hostile run folder ------------------------------------------------------------


def verify_json(capsys, run: Path, archive_keys: Path) -> tuple[int, dict, float]:
    started = time.monotonic()
    code, out, err = run_cli(capsys, "verify", str(run), "--trusted-keys", str(archive_keys), "--json")
    assert "Traceback" not in out + err, err
    return code, json.loads(out), time.monotonic() - started


def failed(report: dict) -> str:
    return " ".join(f"{c['name']}: {c['detail']}" for c in report["checks"] if not c["ok"] and not c.get("skipped"))


def test_verify_a_run_folder_with_a_sparse_giant_refuses_it_by_size(case, capsys):
    run, archive_keys, _ = case
    sparse(run / "output" / "huge.bin" if (run / "output").is_dir() else run / "huge.bin", 4 * GIB)
    code, report, took = verify_json(capsys, run, archive_keys)
    assert code == 1 and took < 5, (took, failed(report))
    assert "sparse" in failed(report) and "huge.bin" in failed(report)


def test_verify_a_run_folder_with_an_oversized_result_json(case, capsys):
    run, archive_keys, _ = case
    with open(run / "result.json", "ab") as fh:
        fh.truncate(64 << 20)
    code, report, took = verify_json(capsys, run, archive_keys)
    assert code == 1 and took < 5, (took, failed(report))
    assert "result.json" in failed(report) and "16.0 MiB" in failed(report)


def test_verify_a_run_folder_with_a_deep_signed_statement(case, capsys):
    """A signature envelope nested 200,000 deep: one failed check, never RecursionError."""
    run, archive_keys, _ = case
    (run / "bundle" / "statement.dsse.json").write_text(deep_json())
    code, report, took = verify_json(capsys, run, archive_keys)
    assert code == 1 and took < 5
    assert "nested deeper" in failed(report), failed(report)


def test_verify_a_statement_with_nan_is_a_failed_check(case, capsys):
    """NaN in the signed statement (re-signed by the trusted key itself) is not JSON: refused."""
    run, archive_keys, _ = case
    envelope = json.loads((run / ENVELOPE).read_text())
    payload = base64.b64decode(envelope["payload"]).decode()
    assert '"predicateType"' in payload
    payload = payload.replace('"predicateType"', '"nan": NaN, "predicateType"', 1)
    envelope["payload"] = base64.b64encode(payload.encode()).decode()
    (run / ENVELOPE).write_text(json.dumps(envelope))
    code, report, _ = verify_json(capsys, run, archive_keys)
    assert code == 1
    assert "NaN" in failed(report), failed(report)


def test_verify_a_tarball_whose_result_json_is_over_its_cap(case, tmp_path, capsys):
    """A packed bundle's result.json of 20 MiB (spaces, then the JSON: it compresses to almost
    nothing, under the zip-bomb ratio) is refused when the bundle is opened, by its size."""
    run, archive_keys, _ = case
    text = (run / "result.json").read_text()
    (run / "result.json").write_text(" " * (20 << 20) + text)
    packed = tmp_path / "big-result.tar.gz"
    with tarfile.open(packed, "w:gz", compresslevel=1) as tar:
        tar.add(run, arcname=run.name)
    code, report, took = verify_json(capsys, packed, archive_keys)
    assert code == 1 and took < 5, (took, failed(report))
    assert "bundle-safe-to-open" in failed(report) and "result.json is 20.0 MiB" in failed(report), failed(report)


# -- text from keys and bundles is data ----------------------------------------------------------


def test_a_trusted_key_origin_with_escape_sequences_is_shown_inert(case, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    pair = keys.generate(tmp_path / "other")
    assert run_cli(capsys, "keys", "trust", str(pair.public))[0] == 0
    origin = tmp_path / "home" / "trusted-keys" / f"{pair.keyid}.origin.json"
    origin.write_text(json.dumps({"source": "\x1b]0;owned\x07\x1b[2Jhere", "added": "\x1b[31mnow"}))
    code, out, err = run_cli(capsys, "keys", "list")
    assert code == 0 and pair.keyid in out
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "\\x1b]0;owned" in out


def test_verify_prints_a_hostile_folder_name_inert(case, tmp_path, capsys):
    """A run folder named with escape sequences and holding a FIFO: the failed check names it
    with its control characters made visible."""
    run, archive_keys, _ = case
    hostile = run.with_name("run\x1b]0;owned\x07\x1b[2J")
    run.rename(hostile)
    fifo(hostile / "pipe")
    code, out, err = run_cli(capsys, "verify", str(hostile), "--trusted-keys", str(archive_keys))
    assert code == 1 and "Traceback" not in err
    assert "\x1b" not in out + err and "\x07" not in out + err
    assert "pipe" in out and "\\x1b]0;owned" in out
