from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from runner.cli import main
from runner.drift import base_changes, check_drift, sbom_changes
from runner.results.record import Result
from runner.results.layout import entry_runs

PROBE = Path(__file__).parent / "entries" / "contract-probe"
ARCHIVE = sorted((Path(__file__).parent.parent / "results" / "archive").glob("*.tar.gz"))
LAYER_A, LAYER_B = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def test_sbom_changes_name_every_package_that_moved():
    before = {"python": [{"name": "numpy", "version": "2.4.6"}, {"name": "six", "version": "1"}],
              "debian": [{"name": "libc6", "version": "2.36-9+deb12u13"}]}
    after = {"python": [{"name": "NumPy", "version": "2.4.7"}, {"name": "rich", "version": "15"}],
             "debian": [{"name": "libc6", "version": "2.36-9+deb12u13"}]}
    assert sbom_changes(before, after) == [
        "python package numpy 2.4.6 -> 2.4.7",
        "python package rich 15 added",
        "python package six 1 removed",
    ]
    assert sbom_changes(after, after) == []


@pytest.mark.docker
def test_drift_of_a_fresh_result_is_none_and_an_edit_is_reported(docker_client, tmp_path, monkeypatch):
    monkeypatch.setenv("RUNNER_RESULTS", str(tmp_path / "results"))
    entry = tmp_path / "contract-probe"
    shutil.copytree(PROBE, entry)
    assert main(["reproduce", str(entry), "--smoke", "--no-infer"]) == 0
    (result,) = entry_runs(tmp_path / "results", "contract-probe")
    fresh = check_drift(result, entry)
    assert fresh.changes == [] and "base image layers identical (same content digests)" in fresh.notes
    sbom = json.loads((result / "sbom.json").read_text())
    assert sbom["base"]["layers"] and len(sbom["base"]["files_sha256"]) == 64

    # The archived base held other files (another layer, another file digest): drift.
    edited = tmp_path / "edited" / result.name
    shutil.copytree(result, edited)
    sbom["base"] = {**sbom["base"], "layers": [LAYER_A], "files_sha256": "0" * 64}
    (edited / "sbom.json").write_text(json.dumps(sbom))
    (change,) = check_drift(edited, entry).changes
    assert change.startswith("base image content changed: layers ") and change.endswith("were aaaaaaaaaaaa")

    # A new claim is a statement about runs, not a change of recipe; a recipe's edit is drift.
    import yaml

    manifest = yaml.safe_load((entry / "entry.yaml").read_text())
    (entry / "entry.yaml").write_text(yaml.safe_dump({**manifest, "claimed": {"score": 0.5}}))
    claim_only = check_drift(result, entry)
    assert claim_only.changes == [] and any("changed only in its claim" in n for n in claim_only.notes)
    manifest["train"]["timeout_minutes"] = 4
    (entry / "entry.yaml").write_text(yaml.safe_dump(manifest))
    assert check_drift(result, entry).changes == ["the entry's manifest changed since the archived run"]
    (entry / "entry.yaml").write_text((PROBE / "entry.yaml").read_text())

    with open(entry / "Dockerfile", "a") as fh:
        fh.write("# a later edit\n")
    assert check_drift(result, entry).changes == [
        "the entry's dockerfile changed since the archived run"
    ]
    assert main(["drift", str(result), "--entry", str(entry), "--fail-on-drift"]) == 1
    (entry / "Dockerfile").write_text((PROBE / "Dockerfile").read_text())

    # The entry's code, by content against the copies in the bundle: an edit, a new file.
    code = next(p for p in sorted(entry.glob("*.py")))
    code.write_text(code.read_text() + "# a later edit\n")
    (entry / "helper.py").write_text("X = 1\n")
    assert check_drift(result, entry).changes == [
        f"the entry's files changed since the archived run: helper.py added, {code.name} changed"
    ]


def test_base_image_is_compared_by_content_not_by_id():
    """Issue 26 item 7: an image id embeds the time docker import ran, so it is never compared."""
    base = {"tag": "runner/base:x-1", "layers": [LAYER_A], "files_sha256": "f" * 64, "debian_release": "Sat, 15 Nov 2025"}
    same = {"base": base}
    assert base_changes(same, json.loads(json.dumps(same)), "runner/base:x-1", "runner/base:x-1") == (
        [], ["base image layers identical (same content digests)"])
    # Layers differ (tar metadata) but every file is the same: not drift.
    retarred = {"base": {**base, "layers": [LAYER_B]}}
    changes, notes = base_changes(same, retarred)
    assert changes == [] and "every file is the same" in notes[0]
    # Files differ: drift, with the layers and the Debian Release named.
    moved = {"base": {**base, "layers": [LAYER_B], "files_sha256": "e" * 64, "debian_release": "Sat, 10 Jan 2026"}}
    (change,), _ = base_changes(same, moved)
    assert change == ("base image content changed: layers bbbbbbbbbbbb, were aaaaaaaaaaaa; "
                      "Debian Release Sat, 10 Jan 2026, was Sat, 15 Nov 2025")
    # Another bootstrap tool, the same Release: dpkg's records differ, the package lists decide.
    other_tool = {"base": {**moved["base"], "debian_release": base["debian_release"], "tool": "mmdebstrap 1.3.5-7"}}
    changes, notes = base_changes(same, other_tool)  # the archived base records no tool: debootstrap's
    assert changes == [] and "bootstrapped by mmdebstrap, the archived one by debootstrap" in notes[0]
    assert notes[0].startswith("base image layers differ")
    # The same tool with other files, or another tool and another Release, is drift.
    assert base_changes({"base": {**base, "tool": "mmdebstrap 1.3.5-7"}}, other_tool)[0]
    assert base_changes(same, {"base": {**moved["base"], "tool": "mmdebstrap 1.3.5-7"}})[0]
    # A bundle made before the SBOM carried the base's digests: the package lists decide.
    changes, notes = base_changes({"debian": []}, same, "runner/base:x-1", "runner/base:x-2")
    assert changes == [] and "recipe tag runner/base:x-2, was runner/base:x-1" in notes[0]
    assert "compared by its package lists" in notes[1]


@pytest.fixture(scope="module")
def archived(tmp_path_factory):
    """The archived bundle unpacked into a folder (check_drift reads folders as bundles)."""
    assert ARCHIVE, "results/archive holds no bundle"
    root = tmp_path_factory.mktemp("archive")
    with tarfile.open(ARCHIVE[0]) as tar:
        tar.extractall(root, filter="data")
    (folder,) = [p for p in root.iterdir() if p.is_dir()]
    return folder


@pytest.mark.docker
def test_archived_bundle_has_no_drift_on_a_machine_that_built_its_own_base(engine, archived):
    """A machine that bootstrapped its own base image has another base id than the archived
    one (docker import stamps its own time), yet drift reports no change when the contents
    are equal: the base by its content, the packages, the entry's files."""
    from runner.entry_build import build_entry
    from runner.manifest import load_entry

    result = Result.read(archived)
    drift = check_drift(ARCHIVE[0], None)
    built = build_entry(load_entry(Path(__file__).parent.parent / "entries" / result.entry.name), engine)
    archived_sbom = json.loads((archived / "sbom.json").read_text())
    assert not any("base image" in c for c in drift.changes), drift.changes
    # Only a package that really moved (a newer Debian mirror state) may be reported, and the
    # entry's own files that changed since (its Dockerfile builds on the framework layer since
    # issue 50: said, as every changed recipe file is).
    moved = [f"the entry's {what} changed since the archived run"
             for what, digest in load_entry(Path(__file__).parent.parent / "entries" / result.entry.name).digests().items()
             if result.entry.digests.get(what) != digest]
    assert drift.changes == moved + sbom_changes(archived_sbom, built.sbom)
    if not drift.changes:
        n = len(archived_sbom["debian"]) + len(archived_sbom["python"])
        same = "the same base id" if built.base.id == result.image.base_id else "another base id"
        print(f"no drift: {n} packages equal, {same} (base {built.base.id[:19]}, archived {result.image.base_id[:19]})")
    # The archived SBOM carries the base's digests: the base was compared by its content.
    assert any(note.startswith("base image layers") for note in drift.notes), drift.notes


@pytest.mark.docker
def test_drift_names_the_package_whose_version_changed(engine, archived, tmp_path):
    """One Debian package's version changed (in a copy of the archived SBOM, against the
    real image built here): the report names that package and its two versions."""
    from runner.entry_build import build_entry
    from runner.manifest import load_entry

    bundle = tmp_path / archived.name
    shutil.copytree(archived, bundle)
    result = Result.read(bundle)
    built = build_entry(load_entry(Path(__file__).parent.parent / "entries" / result.entry.name), engine)
    real = {p["name"]: p["version"] for p in built.sbom["debian"]}
    sbom = json.loads((bundle / "sbom.json").read_text())
    for package in sbom["debian"]:
        if package["name"] == "libc6":
            package["version"] = "2.36-9+deb12u1"  # as if archived before a point release
    (bundle / "sbom.json").write_text(json.dumps(sbom))
    drift = check_drift(bundle, None)
    assert f"debian package libc6 2.36-9+deb12u1 -> {real['libc6']}" in drift.changes
    assert not any("base image" in c for c in drift.changes)
    assert main(["drift", str(bundle), "--fail-on-drift"]) == 1
