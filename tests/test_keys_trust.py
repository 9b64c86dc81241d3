"""One trust store (issue 45): the keys every command trusts are the store's under the
runner's home and your own, or ``--trusted-keys``; a key that merely sits beside bundles
(``results/archive/keys/``) is trusted only once ``runner keys trust`` is told so. A key pair
whose public half is another pair's is refused, and so is a corrupt file in the store."""

from __future__ import annotations

import json

import pytest
from synthetic_result import make_result_folder, new_signer, stage_mnist_stand_in
from tests.hostile.hostile_helpers import assert_one_line_error, run_cli

from runner import keys
from runner.bundle import make_bundle
from runner.errors import UserError
from runner.fingerprint import capture_host
from runner.keys.trust import list_trusted, trust, trusted_keys, untrust

ENTRY = "mnist-cnn-cpu"
RUN = "20261122T010203Z-s0-abc123"


@pytest.fixture
def home(private_home, monkeypatch):
    monkeypatch.delenv(keys.ENV_VAR, raising=False)
    monkeypatch.delenv(keys.PUBKEY_ENV_VAR, raising=False)
    return private_home


@pytest.fixture(scope="module")
def archived(tmp_path_factory):
    """results/: one run signed by a stranger's key, whose public key is published beside the
    archive (results/archive/keys/), as the repository keeps its own."""
    root = tmp_path_factory.mktemp("archived")
    results = root / "results"
    signer, _ = new_signer(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(root / "home"))
        folder = make_result_folder(results / ENTRY / RUN, stage_mnist_stand_in(root / "home"), capture_host())
    make_bundle(folder, signer)
    beside = results / "archive" / "keys"
    beside.mkdir(parents=True)
    (beside / "stranger.pub.json").write_text(keys.public_key_json(signer.public_key))
    return results, folder, beside / "stranger.pub.json", signer.public_key.keyid


def _verified(capsys, results, *options) -> bool:
    code, out, err = run_cli(capsys, "ls", "--results", str(results), "--json", *options)
    assert code == 0, err
    (row,) = json.loads(out)["runs"]
    return row["verified"]


def test_trust_list_untrust_round_trip(home, tmp_path, capsys):
    assert run_cli(capsys, "keys", "generate")[0] == 0
    own = keys.read_public_key(home / "keys" / "signing.pub.json").keyid
    other = keys.generate(tmp_path / "other")

    code, out, err = run_cli(capsys, "keys", "trust", str(other.public))
    assert (code, out.strip()) == (0, f"trusted {other.keyid}  ({other.public})"), err
    code, out, _ = run_cli(capsys, "keys", "trust", str(other.public))  # again: nothing changes
    assert (code, out.strip()) == (0, f"already trusted {other.keyid}  ({other.public})")
    assert sorted(p.name for p in (home / "trusted-keys").iterdir()) == sorted(
        f"{k}{suffix}" for k in (own, other.keyid) for suffix in (".pub.json", ".origin.json"))

    code, out, _ = run_cli(capsys, "keys", "list", "--json")
    listed = {k["keyid"]: k for k in json.loads(out)}
    assert code == 0 and set(listed) == {own, other.keyid}
    assert listed[other.keyid]["source"] == str(other.public.resolve()) and listed[other.keyid]["added"]
    code, out, _ = run_cli(capsys, "keys", "list")
    assert code == 0 and len(out.splitlines()) == 2 and all(k in out for k in listed)
    assert {k.keyid for k in trusted_keys(None)} == {own, other.keyid}

    code, out, _ = run_cli(capsys, "keys", "untrust", other.keyid[:8])
    assert (code, out.strip()) == (0, f"untrusted {other.keyid}")
    assert [k.keyid for k in trusted_keys(None)] == [own]
    assert_one_line_error(*run_cli(capsys, "keys", "untrust", other.keyid[:8]), "no trusted key", other.keyid[:8])
    assert_one_line_error(*run_cli(capsys, "keys", "untrust", "abc"), "not a key id")


def test_your_own_key_is_trusted_without_the_store(home):
    """A key made before the store existed (or named by RUNNER_SIGNING_KEY) is still trusted."""
    pair = keys.generate()
    (mine,) = list_trusted()
    assert mine.keyid == pair.keyid and mine.added is None and mine.path == pair.public
    with pytest.raises(UserError, match="no trusted key"):  # not in the store: nothing to take out
        untrust(pair.keyid)


def test_a_key_beside_the_archive_is_not_trusted_until_you_trust_it(home, archived, capsys):
    results, folder, beside, keyid = archived
    stage_mnist_stand_in(home)  # the data the run used: verify recomputes its scores with it
    assert not _verified(capsys, results)
    code, out, _ = run_cli(capsys, "verify", str(folder), "--json")
    (check,) = [c for c in json.loads(out)["checks"] if c["name"] == "trusted-key"]
    assert code == 1 and not check["ok"]

    code, out, _ = run_cli(capsys, "keys", "trust", str(beside))
    assert code == 0 and keyid in out
    assert _verified(capsys, results)
    code, out, _ = run_cli(capsys, "verify", str(folder), "--json")
    (check,) = [c for c in json.loads(out)["checks"] if c["name"] == "trusted-key"]
    assert check["ok"], check


def test_trusted_keys_option_overrides_the_store(home, archived, tmp_path, capsys):
    results, _, beside, _ = archived
    stage_mnist_stand_in(home)  # the data the run used: verify recomputes its scores with it
    assert _verified(capsys, results, "--trusted-keys", str(beside.parent))  # a folder, given: trusted
    trust(beside)
    stranger = keys.generate(tmp_path / "someone")
    assert not _verified(capsys, results, "--trusted-keys", str(stranger.public))  # the store is not read


def test_a_public_key_of_another_pair_is_refused(home, tmp_path, capsys):
    pair = keys.generate()
    other = keys.generate(tmp_path / "other")
    pair.public.write_text(other.public.read_text())  # the home's signing.pub.json, of another pair
    with pytest.raises(UserError, match="is not the public half") as err:
        keys.load_signer()
    assert pair.keyid[:16] in str(err.value) and other.keyid[:16] in str(err.value)
    assert "runner keys generate --force" in err.value.fix
    assert_one_line_error(*run_cli(capsys, "ls", "--results", str(tmp_path / "none")), "is not the public half",
                          pair.keyid[:16], other.keyid[:16])


def test_a_corrupt_file_in_the_store_is_one_line_naming_it(home, tmp_path, capsys):
    other = keys.generate(tmp_path / "other")
    stored = home / "trusted-keys" / f"{trust(other.public).keyid}.pub.json"
    stored.write_text("{not json")
    line = assert_one_line_error(*run_cli(capsys, "keys", "list"), str(stored), f"runner keys untrust {other.keyid}")
    assert "Fix:" in line
    assert_one_line_error(*run_cli(capsys, "ls", "--results", str(tmp_path / "none")), str(stored))
    assert run_cli(capsys, "keys", "untrust", other.keyid)[0] == 0
    assert list_trusted() == []


def test_a_store_file_named_for_another_key_is_refused(home, tmp_path):
    a, b = keys.generate(tmp_path / "a"), keys.generate(tmp_path / "b")
    trust(a.public)
    (home / "trusted-keys" / f"{a.keyid}.pub.json").write_text(b.public.read_text())
    with pytest.raises(UserError, match="not the key it is named for"):
        trusted_keys(None)


def test_generate_trusts_the_key_reproduce_signs_with_and_no_other(home, tmp_path, capsys):
    code, out, _ = run_cli(capsys, "keys", "generate", "--out", str(tmp_path / "ci"))
    assert code == 0 and not (home / "trusted-keys").exists()  # written elsewhere: not yours until configured
    assert run_cli(capsys, "keys", "generate")[0] == 0
    first = keys.read_public_key(home / "keys" / "signing.pub.json").keyid
    code, out, _ = run_cli(capsys, "keys", "generate", "--force")
    second = keys.read_public_key(home / "keys" / "signing.pub.json").keyid
    assert code == 0 and f"runner keys untrust {first[:16]}" in " ".join(out.split())
    assert {k.keyid for k in trusted_keys(None)} == {first, second}
