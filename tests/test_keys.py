"""Signing keys: owner-only private key, public key file with its id, its pair held together, trust loading."""

from __future__ import annotations

import json
import stat

import pytest
from securesystemslib.signer import CryptoSigner

from runner import keys
from runner.cli import main
from runner.errors import UserError
from runner.keys.trust import trusted_keys


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(keys.ENV_VAR, raising=False)
    return tmp_path / "home"


def test_generate_writes_owner_only_private_key_and_public_key_with_id(home):
    pair = keys.generate()
    assert pair.private == home / "keys" / "signing.key"
    assert stat.S_IMODE(pair.private.stat().st_mode) == 0o600
    assert pair.private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    public = json.loads(pair.public.read_text())
    assert public["keyid"] == pair.keyid
    assert public["keytype"] == public["scheme"] == "ed25519"
    assert len(public["keyval"]["public"]) == 64  # 32 bytes, hex


def test_loaded_signer_signs_what_the_public_key_verifies(home):
    pair = keys.generate()
    signer = keys.load_signer()
    assert isinstance(signer, CryptoSigner)
    assert signer.public_key.keyid == pair.keyid
    sig = signer.sign(b"payload")
    (trusted,) = trusted_keys(None)  # default: the local public key
    trusted.verify_signature(sig, b"payload")


def test_generate_never_overwrites_without_force(home):
    first = keys.generate()
    with pytest.raises(UserError, match="already exists"):
        keys.generate()
    assert keys.read_public_key(first.public).keyid == first.keyid  # untouched
    second = keys.generate(force=True)
    assert second.keyid != first.keyid


def test_no_key_configured_means_no_signer(home):
    assert keys.load_signer() is None
    assert trusted_keys(None) == []


def test_env_var_names_the_key(home, tmp_path, monkeypatch):
    pair = keys.generate(tmp_path / "elsewhere")
    monkeypatch.setenv(keys.ENV_VAR, str(pair.private))
    assert keys.load_signer().public_key.keyid == pair.keyid
    monkeypatch.setenv(keys.ENV_VAR, str(tmp_path / "missing.key"))
    with pytest.raises(UserError, match="no signing key"):
        keys.load_signer()


def test_private_key_readable_by_others_is_refused(home):
    pair = keys.generate()
    pair.private.chmod(0o644)
    with pytest.raises(UserError, match="readable by others"):
        keys.load_signer()


def test_trusted_keys_from_a_folder(tmp_path):
    a = keys.generate(tmp_path / "a")
    b = keys.generate(tmp_path / "b")
    folder = tmp_path / "trusted"
    folder.mkdir()
    (folder / "alice.pub.json").write_text(a.public.read_text())
    (folder / "bob.pub.json").write_text(b.public.read_text())
    assert {k.keyid for k in trusted_keys(folder)} == {a.keyid, b.keyid}


def test_public_key_file_cannot_lie_about_its_keyid(tmp_path):
    pair = keys.generate(tmp_path)
    data = json.loads(pair.public.read_text())
    data["keyid"] = "f" * 64
    pair.public.write_text(json.dumps(data))
    with pytest.raises(UserError, match="claims keyid"):
        trusted_keys(pair.public)


def test_cli_generate_and_show(home, capsys):
    assert main(["keys", "generate"]) == 0
    out = capsys.readouterr().out
    keyid = json.loads((home / "keys" / "signing.pub.json").read_text())["keyid"]
    assert keyid in out
    assert main(["keys", "generate"]) != 0
    assert "already exists" in capsys.readouterr().err
    assert main(["keys", "show", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["keyid"] == keyid


def test_a_key_given_by_uri_signs_through_securesystemslib(home, tmp_path, monkeypatch):
    """file2: is securesystemslib's file scheme; KMS and HSM keys take the same path."""
    pair = keys.generate(tmp_path / "ci")
    monkeypatch.setenv(keys.ENV_VAR, f"file2:{pair.private}")
    signer = keys.load_signer()
    assert signer.public_key.keyid == pair.keyid
    keys.read_public_key(pair.public).verify_signature(signer.sign(b"payload"), b"payload")


def test_a_uri_key_with_the_wrong_public_key_is_refused(home, tmp_path, monkeypatch):
    pair = keys.generate(tmp_path / "ci")
    other = keys.generate(tmp_path / "other")
    monkeypatch.setenv(keys.ENV_VAR, f"file2:{pair.private}")
    monkeypatch.setenv(keys.PUBKEY_ENV_VAR, str(other.public))
    with pytest.raises(UserError, match=f"is not the public half .* {pair.keyid[:16]}"):
        keys.load_signer()


def test_a_kms_uri_without_its_public_key_says_how_to_give_it(home, monkeypatch):
    monkeypatch.setenv(keys.ENV_VAR, "gcpkms:projects/p/locations/l/keyRings/r/cryptoKeys/k/cryptoKeyVersions/1")
    monkeypatch.delenv(keys.PUBKEY_ENV_VAR, raising=False)
    with pytest.raises(UserError) as err:
        keys.load_signer()
    assert keys.PUBKEY_ENV_VAR in err.value.fix


def test_a_bundle_signed_with_a_uri_key_verifies(home, tmp_path, monkeypatch):
    from runner.bundle import make_bundle
    from runner.verify.integrity import check_signature
    from runner.verify.evidence import Auditor, Evidence

    pair = keys.generate(tmp_path / "ci")
    monkeypatch.setenv(keys.ENV_VAR, f"file2:{pair.private}")
    from runner.fingerprint import capture_host
    from tests.synthetic_result import make_result_folder, stage_mnist_stand_in

    folder = make_result_folder(tmp_path / "20261122T010203Z-s0-abc123",
                                stage_mnist_stand_in(tmp_path / "data"), capture_host(None))
    make_bundle(folder, keys.load_signer())
    verdict = check_signature(Evidence(folder, Auditor(trusted_keys=[keys.read_public_key(pair.public)]), tmp_path))
    assert verdict.ok, verdict.detail
