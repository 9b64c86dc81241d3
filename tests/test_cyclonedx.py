"""The image's SBOM in CycloneDX 1.6 (``sbom.cdx.json``): valid by CycloneDX's own JSON schema
(cyclonedx-python-lib's strict validator), purls as packageurl-python writes them, each locked
Python package with its sha256 from the lock, the same bytes for the same image; ``runner
verify`` rebuilds it and a real run writes it."""

from __future__ import annotations

import json

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from packageurl import PackageURL

from runner import paths
from runner.bundle import Limits, open_bundle
from runner.entry_build.cyclonedx import FILE, cyclonedx_document, deb_purl, pypi_purl
from runner.results.layout import entry_runs
from runner.entry_build.lockfile import Pin, normalise_name, parse_lock

ARCHIVE = paths.repo_root() / "results" / "archive"


def _invalid(document: dict) -> object:
    """None when the document is valid CycloneDX 1.6 JSON, else the validator's error."""
    return JsonStrictValidator(SchemaVersion.V1_6).validate_str(json.dumps(document))


@pytest.fixture(scope="module")
def archived(tmp_path_factory) -> tuple[dict, list[Pin], dict]:
    """sbom.json, the entry's lock and result.json of the archived default-entry bundle: a real image."""
    (bundle,) = sorted(ARCHIVE.glob("mnist-cnn-cpu-*.tar.gz"))[-1:]
    with open_bundle(bundle, Limits()) as opened:
        root = opened.root
        return (json.loads((root / "sbom.json").read_text()), parse_lock(root / "entry" / "requirements.lock"),
                json.loads((root / "result.json").read_text()))


def _document(archived) -> dict:
    sbom, pins, result = archived
    return cyclonedx_document(sbom, pins, result["image"]["id"], result["image"]["tag"], result["toolkit"]["version"])


def test_a_real_images_sbom_is_valid_cyclonedx_with_every_package(archived):
    sbom, pins, _ = archived
    document = _document(archived)
    assert _invalid(document) is None
    assert document["bomFormat"] == "CycloneDX" and document["specVersion"] == "1.6"
    purls = {c["purl"] for c in document["components"] if "purl" in c}
    assert purls == ({pypi_purl(p["name"], p["version"]) for p in sbom["python"]}
                     | {deb_purl(p["name"], p["version"]) for p in sbom["debian"]})
    assert len(purls) == len(sbom["python"]) + len(sbom["debian"]) > 100
    (base,) = [c for c in document["components"] if c["type"] == "container"]
    assert {"name": "runner:base:files_sha256", "value": sbom["base"]["files_sha256"]} in base["properties"]


def test_purls_are_written_as_packageurl_writes_them(archived):
    sbom, _, _ = archived
    cases = [(p["name"], p["version"]) for p in sbom["python"]] + [("ml_dtypes", "0.6.0"), ("Jinja2", "2.13.0+cpu")]
    for name, version in cases:
        assert pypi_purl(name, version) == PackageURL(type="pypi", name=name, version=version).to_string()
    debian = [(p["name"], p["version"]) for p in sbom["debian"]] + [("bsdutils", "1:2.38.1-5+deb12u3")]
    assert any(":" in v for _, v in debian) and any("+" in v for _, v in debian)  # epochs and Debian revisions
    for name, version in debian:
        assert deb_purl(name, version) == PackageURL(type="deb", namespace="debian", name=name,
                                                     version=version).to_string()


def test_each_locked_python_package_carries_its_sha256_from_the_lock(archived):
    _, pins, _ = archived
    locked = {(p.key, p.version): set(p.hashes) for p in pins}
    python = [c for c in _document(archived)["components"] if c.get("purl", "").startswith("pkg:pypi/")]
    hashed = [c for c in python if "hashes" in c]
    assert len(hashed) == len(pins) and len(python) > len(hashed)  # pip, which the image has unlocked
    for component in hashed:
        key = (normalise_name(component["name"]), component["version"])
        assert {h["content"] for h in component["hashes"]} == locked[key]
        assert {h["alg"] for h in component["hashes"]} == {"SHA-256"}


def test_the_same_image_gives_the_same_document_and_another_another_serial(archived):
    sbom, pins, result = archived
    first, again = _document(archived), _document(archived)
    assert json.dumps(first) == json.dumps(again) and "timestamp" not in first["metadata"]
    other = cyclonedx_document({**sbom, "python": sbom["python"][1:]}, pins, result["image"]["id"],
                               result["image"]["tag"], result["toolkit"]["version"])
    assert other["serialNumber"] != first["serialNumber"] and _invalid(other) is None


def test_an_image_without_a_lock_or_a_base_record_is_still_valid():
    document = cyclonedx_document({"python": [{"name": "torch", "version": "2.13.0+cpu"}], "debian": []},
                                  None, None, None, "0.1.0")
    assert _invalid(document) is None
    (torch,) = document["components"]
    assert torch["purl"] == "pkg:pypi/torch@2.13.0%2Bcpu" and "hashes" not in torch


@pytest.mark.docker
def test_a_smoke_run_writes_the_cyclonedx_sbom_and_verify_rebuilds_it(docker_client, tmp_path, monkeypatch, capsys):
    from runner import keys
    from runner.cli import main

    pair = keys.generate(tmp_path / "keys")
    monkeypatch.setenv(keys.ENV_VAR, str(pair.private))
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
    assert main(["reproduce", str(paths.repo_root() / "entries" / "mnist-cnn-cpu"), "--smoke", "--no-infer"]) == 0
    (folder,) = entry_runs(tmp_path / "results", "mnist-cnn-cpu")  # a smoke run: under smoke/
    document = json.loads((folder / FILE).read_text())
    assert _invalid(document) is None
    sbom = json.loads((folder / "sbom.json").read_text())
    assert len(document["components"]) == len(sbom["python"]) + len(sbom["debian"]) + 1  # and the base image
    assert FILE in {f["path"] for f in json.loads((folder / "bundle" / "manifest.json").read_text())["files"]}
    capsys.readouterr()
    main(["verify", str(folder), "--trusted-keys", str(pair.public), "--json"])
    (check,) = [c for c in json.loads(capsys.readouterr().out)["checks"] if c["name"] == "sbom"]
    assert check["ok"] and "with their sha256 from the lock" in check["detail"], check


def test_a_bundle_from_before_cyclonedx_has_none_and_still_passes_the_sbom_row():
    """The claim's bundles (archived before the CycloneDX file) pass with a note; the default
    entry's archived bundle (re-made since) carries the file and verify rebuilds it."""
    from runner.keys.trust import trusted_keys
    from runner.verify import Auditor, verify_bundle

    auditor = Auditor(trusted_keys=trusted_keys(ARCHIVE / "keys"))
    older = sorted((ARCHIVE / "claims" / "mnist-cnn-cpu").glob("mnist-cnn-cpu-*.tar.gz"))[0]
    report = verify_bundle(older, auditor)
    assert report.get("sbom").ok and report.get("sbom").detail.startswith(f"no {FILE}")
    assert report.get("file-digests").ok and report.get("signature").ok
    (current,) = sorted(ARCHIVE.glob("mnist-cnn-cpu-*.tar.gz"))
    report = verify_bundle(current, auditor)
    assert report.get("sbom").ok and "with their sha256 from the lock" in report.get("sbom").detail

