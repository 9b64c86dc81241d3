"""The archived bundles in results/archive/ verify with the committed keys."""

from __future__ import annotations

import json

import pytest

from runner import data, paths
from runner.cli import main

ARCHIVE = paths.repo_root() / "results" / "archive"
BUNDLES = sorted(ARCHIVE.glob("*.tar.gz"))


def test_there_is_an_archived_bundle():
    assert BUNDLES


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: p.name)
def test_archived_bundle_verifies_with_the_published_key(bundle, capsys):
    data.prepare("mnist")  # the auditor's own labels, checked against the pinned digests
    capsys.readouterr()  # what staging them printed
    code = main(["verify", str(bundle), "--trusted-keys", str(ARCHIVE / "keys"), "--json"])
    report = json.loads(capsys.readouterr().out)
    assert all(c["ok"] for c in report["checks"]) and report["verified"]
    assert code == (0 if report["counts"] else 3)  # the verdict is the exit code


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: p.name)
def test_archived_bundle_fails_without_a_trusted_key(bundle, tmp_path, capsys):
    (tmp_path / "keys").mkdir()
    assert main(["keys", "generate", "--out", str(tmp_path / "keys")]) == 0
    assert main(["verify", str(bundle), "--trusted-keys", str(tmp_path / "keys")]) == 1
    assert "✗ trusted-key" in capsys.readouterr().out
