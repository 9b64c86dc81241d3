"""Issue 46, the site builder and study reports: ``runner leaderboard --html DIR`` never
deletes what the runner did not write, builds beside DIR and swaps the site in whole, and a
study's report.json is read as untrusted input (one bad study is listed with its reason, the
leaderboard shows everything else).

Each case runs the real CLI in-process over a results folder of its own (most with no runs:
the site is then the tables alone, built in about a second).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import time
from pathlib import Path

import pytest
from hostile_helpers import assert_one_line_error, run_cli
from synthetic_result import make_result_folder, stage_mnist_stand_in

from runner.fingerprint import capture_host
from runner.leaderboard import formats, html
from runner.leaderboard import studies as studies_module
from runner.leaderboard.studies import PNG_MAGIC
from runner.safe_read import Unreadable
from runner.study.common import read_curve

ENTRY = "mnist-cnn-cpu"
MANIFEST = ".runner-site.json"  # what the runner wrote into a site folder
STUDY = "lesion-20261124T230000Z"


@pytest.fixture
def results(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))
    folder = tmp_path / "results"
    folder.mkdir()
    return folder


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (links and all) and what it holds."""
    out = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            out[rel] = "link -> " + os.readlink(path)
        elif path.is_file():
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            out[rel] = "folder"
    return out


def site(capsys, results: Path, out: Path, *more: str) -> tuple[int, str, str]:
    return run_cli(capsys, "leaderboard", "--results", str(results), "--html", str(out), *more)


def mount_of(path: Path) -> Path:
    """The mount point of the filesystem holding ``path`` (the disk a full-disk error must name)."""
    path = path.resolve()
    while path != path.parent and os.stat(path.parent).st_dev == os.stat(path).st_dev:
        path = path.parent
    return path


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def test_a_folder_of_the_users_own_files_is_refused_and_left_byte_for_byte(results, tmp_path, capsys):
    mine = tmp_path / "mine"
    for rel, text in {"keys/notes.txt": "my notes", "plots/mine.png": "my plot", "tasks/x": "x",
                      "index.html": "<h1>my page</h1>"}.items():
        (mine / rel).parent.mkdir(parents=True, exist_ok=True)
        (mine / rel).write_text(text)
    before = snapshot(mine)
    started = time.monotonic()
    line = assert_one_line_error(*site(capsys, results, mine), "keys/notes.txt", "plots/mine.png", "tasks/x",
                                 "index.html", "did not write")
    assert time.monotonic() - started < 5
    assert snapshot(mine) == before and leftovers(mine) == [], line


def test_the_archive_folder_is_refused_and_its_keys_and_bundles_stay(results, capsys):
    archive = results / "archive"
    (archive / "keys").mkdir(parents=True)
    for n in range(4):
        (archive / "keys" / f"k{n}.pub.json").write_text(json.dumps({"keyid": f"{n}" * 64}))
        (archive / f"mnist-cnn-cpu-run{n}.tar.gz").write_bytes(os.urandom(512))
    before = snapshot(archive)
    line = assert_one_line_error(*site(capsys, results, archive), "keys/k0.pub.json", "and 3 more")
    assert "8 files" in line
    assert snapshot(archive) == before and leftovers(archive) == []


def test_a_site_the_runner_built_is_rebuilt_and_a_file_added_since_is_refused(results, tmp_path, capsys):
    out = tmp_path / "public" / "site"
    code, printed, err = site(capsys, results, out)
    assert code == 0, err
    manifest = json.loads((out / MANIFEST).read_text())
    assert "index.html" in manifest["files"] and "tasks" in manifest["folders"]
    assert str(tmp_path) not in (out / MANIFEST).read_text()  # paths relative to the site only
    code, printed, err = site(capsys, results, out)  # a second build over its own site
    assert code == 0, err
    assert leftovers(out) == [] and (out / "index.html").is_file()

    (out / "tasks" / "my-notes.md").write_text("mine")
    (out / "style.css").write_text("body { color: red }")  # changed since the runner wrote it
    before = snapshot(out)
    assert_one_line_error(*site(capsys, results, out), "tasks/my-notes.md", "style.css (changed since")
    assert snapshot(out) == before and leftovers(out) == []


def test_an_empty_folder_is_fine_and_a_file_or_a_link_is_refused(results, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert site(capsys, results, empty)[0] == 0 and (empty / "index.html").is_file()
    a_file = tmp_path / "notes.txt"
    a_file.write_text("mine")
    assert_one_line_error(*site(capsys, results, a_file), "not a folder")
    assert a_file.read_text() == "mine"
    link = tmp_path / "link"
    link.symlink_to(empty)
    assert_one_line_error(*site(capsys, results, link), "is a link")
    assert link.is_symlink() and (empty / "index.html").is_file()


def test_a_full_disk_halfway_leaves_the_old_site_and_names_the_disk_of_the_folder(results, tmp_path, capsys,
                                                                                monkeypatch):
    out = tmp_path / "site"
    assert site(capsys, results, out)[0] == 0
    before = snapshot(out)
    render = html._render

    def full_disk(path: Path, template: str, **context) -> None:
        if template == "index.html":  # the last page: everything else is written by now
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        render(path, template, **context)

    monkeypatch.setattr(html, "_render", full_disk)
    line = assert_one_line_error(*site(capsys, results, out), "no space left", str(out),
                                 f"mounted at {mount_of(tmp_path)}")
    assert "is as it was" in line
    assert snapshot(out) == before and leftovers(out) == []


def test_a_failure_halfway_into_a_new_folder_leaves_nothing(results, tmp_path, capsys, monkeypatch):
    out = tmp_path / "new-site"
    monkeypatch.setattr(html, "_render", lambda *a, **k: (_ for _ in ()).throw(OSError(errno.EIO, "I/O error")))
    assert_one_line_error(*site(capsys, results, out), "could not write the site", "I/O error")
    assert not out.exists() and leftovers(out) == []


# -- study reports --------------------------------------------------------------------------------

def _study(results: Path, name: str = STUDY, **changes) -> Path:
    folder = results / ENTRY / "studies" / name
    folder.mkdir(parents=True)
    (folder / "lesion.png").write_bytes(PNG_MAGIC + b"\0" * 64)
    report = {
        "schema_version": 1, "kind": "lesion", "entry": ENTRY, "written_at": "2026-11-24T23:00:00Z",
        "tables": [{"title": "Lesion study", "headers": ["variant", "median TTA s"], "rows": [["full", "18.3"]]}],
        "plots": [{"file": "lesion.png", "caption": "median TTA per variant"}],
        "notes": ["a note"], "runs": [],
    } | changes
    (folder / "report.json").write_text(json.dumps(report))
    return folder


HOSTILE_REPORTS = {
    "tables-int": ({"tables": 5}, "its tables is not a list"),
    "tables-of-int": ({"tables": [5]}, "a table is not"),
    "plots-int": ({"plots": 5}, "its plots is not a list"),
    "title-object": ({"tables": [{"title": {"a": 1}, "headers": [], "rows": []}]}, "a table's title is not a string"),
    "caption-list": ({"plots": [{"file": "lesion.png", "caption": [1]}]}, "a plot's caption is not a string"),
}


def test_one_hostile_study_report_each_is_listed_with_its_reason_and_the_board_shows_the_rest(results, tmp_path,
                                                                                           capsys):
    names = {}
    for n, (key, (change, _)) in enumerate(HOSTILE_REPORTS.items()):
        names[key] = _study(results, f"lesion-20261124T23000{n}Z", **change).name
    nan = _study(results, "lesion-20261124T230010Z")
    (nan / "report.json").write_text((nan / "report.json").read_text().replace('"18.3"', "NaN"))
    deep = _study(results, "lesion-20261124T230011Z")
    (deep / "report.json").write_text('{"schema_version": 1, "tables": ' + "[" * 200_000 + "]" * 200_000 + "}")
    fifo = _study(results, "lesion-20261124T230012Z")
    (fifo / "report.json").unlink()
    os.mkfifo(fifo / "report.json")
    good = _study(results, "lesion-20261124T230013Z")

    started = time.monotonic()
    code, out, err = run_cli(capsys, "leaderboard", "--results", str(results))
    assert code == 0 and "Traceback" not in out + err, err
    assert time.monotonic() - started < 5
    skipped = [line for line in out.splitlines() if line.startswith("skipped: study")]
    for key, (_, why) in HOSTILE_REPORTS.items():
        assert any(f"{ENTRY}/{names[key]}: " in line and why in line for line in skipped), (key, skipped)
    for folder, why in ((nan, "NaN, not a number"), (deep, "nested deeper"), (fifo, "FIFO")):
        assert any(f"{ENTRY}/{folder.name}: " in line and why in line for line in skipped), (folder.name, skipped)
    assert not any(good.name in line for line in skipped)
    assert "MNIST" in out  # the tables are still printed

    code, out, err = site(capsys, results, tmp_path / "site")
    assert code == 0 and "Traceback" not in out + err, err
    assert (tmp_path / "site" / "index.html").is_file()


def test_a_study_plot_that_became_a_fifo_or_a_link_out_is_left_out_of_the_site(results, tmp_path, capsys,
                                                                              monkeypatch):
    """The plots are read again when the site copies them, through runner.safe_read: a plot
    replaced by a FIFO (or a link out of the study's folder) after the report was read is left
    out with why; the site is written, nothing hangs."""
    home = tmp_path / "home"
    make_result_folder(results / ENTRY / "20261122T010203Z-s0-aaaaaa", stage_mnist_stand_in(home), capture_host())
    study = _study(results, plots=[{"file": "lesion.png", "caption": "a"}, {"file": "other.png", "caption": "b"}])
    (study / "other.png").write_bytes(PNG_MAGIC + b"\1" * 64)
    secret = tmp_path / "secret.png"
    secret.write_bytes(PNG_MAGIC + b"host file")
    real = studies_module.read_study

    def then_swap(folder: Path, entry: str):
        found = real(folder, entry)
        (folder / "lesion.png").unlink()
        os.mkfifo(folder / "lesion.png")
        (folder / "other.png").unlink()
        (folder / "other.png").symlink_to(secret)
        return found

    monkeypatch.setattr(studies_module, "read_study", then_swap)
    started = time.monotonic()
    code, out, err = site(capsys, results, tmp_path / "site")
    assert code == 0 and "Traceback" not in out + err, err
    assert time.monotonic() - started < 10
    page = tmp_path / "site" / "reproductions" / ENTRY / "studies" / f"{STUDY}.html"
    text = page.read_text()
    assert "plot left out: lesion.png: is a FIFO" in text and "plot left out: other.png" in text
    assert list((page.parent / STUDY).glob("*.png")) == []
    assert b"host file" not in b"".join(p.read_bytes() for p in (tmp_path / "site").rglob("*") if p.is_file())


@pytest.mark.parametrize("text, why", [
    ("", None),  # an empty curve.tsv: no points (was an IndexError)
    ("epoch\thours\ttop1Accuracy\n1\t0.01\t97.5\n2\tlots\t98.0\n", "line 3 is not epoch, hours and accuracy"),
    ("epoch\thours\ttop1Accuracy\n1\tnan\t97.5\n", "line 2 holds a number that is not finite"),
])
def test_a_studys_curve_tsv_is_read_as_untrusted_input(tmp_path, text, why):
    (tmp_path / "curve.tsv").write_text(text)
    if why is None:
        assert read_curve(tmp_path) == []
    else:
        with pytest.raises(Unreadable, match=why):
            read_curve(tmp_path)
    (tmp_path / "curve.tsv").unlink()
    os.mkfifo(tmp_path / "curve.tsv")
    with pytest.raises(Unreadable, match="FIFO"):  # was: no points, as if the run had no curve
        read_curve(tmp_path)


def test_a_forged_manifest_never_removes_a_file_outside_the_site_or_one_it_did_not_find(results, tmp_path, capsys):
    """A shared site folder whose manifest names ``../victim.txt`` (with its true digest) or a
    file that is not there: rebuilding removes only what it found in the site, as written."""
    out = tmp_path / "site"
    assert site(capsys, results, out)[0] == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own")
    (tmp_path / "empty-dir").mkdir()
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["files"]["../victim.txt"] = hashlib.sha256(victim.read_bytes()).hexdigest()
    manifest["files"]["/" + str(victim).lstrip("/")] = manifest["files"]["../victim.txt"]
    manifest["folders"] += ["../empty-dir", str(tmp_path / "empty-dir")]
    (out / MANIFEST).write_text(json.dumps(manifest))
    code, _, err = site(capsys, results, out)
    assert code == 0, err
    assert victim.read_text() == "the user's own" and (tmp_path / "empty-dir").is_dir()
    assert "../victim.txt" not in (out / MANIFEST).read_text() and leftovers(out) == []


def test_figures_from_a_hand_edited_record_are_written_never_raised():
    """The site and the tables write what a result holds: a negative cost or an infinite time
    shows as such or as "—", never a ValueError that takes the whole board down."""
    assert formats.dollars(-1.5) == "-$1.50" and formats.dollars(-0.001) == "-$0.0010"
    assert formats.duration(float("inf")) == "—" and formats.run_duration(float("nan")) == "—"
    assert formats.duration(-90) == "-0:01:30" and formats.dollars(float("inf")) == "—"
    assert formats.milliseconds(float("nan")) == "—" and formats.ratio(float("inf")) == "—"
    assert formats.month(5) == "5"


def test_a_hand_edited_fingerprints_gpus_that_are_not_a_list_show_as_none():
    """A run's fingerprint is its record's: GPUs that are a number or a string (not the list
    capture_host writes) show as none, never a TypeError that takes the board down."""
    for gpus in (3, "A100", {"name": "A100"}):
        rows = dict(html._fingerprint_rows({"gpu": {"gpus": gpus}, "memory": {"total_bytes": 2**31}}))
        assert rows["GPUs"] == "none" and rows["Memory"] == "2.0 GiB"
    rows = dict(html._fingerprint_rows({"gpu": {"gpus": [{"name": "A100"}, "junk"]}}))
    assert rows["GPUs"] == "A100"


def test_a_file_added_to_the_old_site_while_the_new_one_is_built_is_kept(results, tmp_path, capsys, monkeypatch):
    out = tmp_path / "site"
    assert site(capsys, results, out)[0] == 0
    render = html._render

    def meanwhile(path: Path, template: str, **context) -> None:
        if template == "index.html":
            (out / "tasks" / "late.txt").write_text("written while the site was built")
        render(path, template, **context)

    monkeypatch.setattr(html, "_render", meanwhile)
    code, _, err = site(capsys, results, out)
    assert code == 0 and "kept files the runner did not write" in err, err
    (kept,) = [out.parent / name for name in leftovers(out)]
    assert (kept / "tasks" / "late.txt").read_text() == "written while the site was built"
    assert [str(p.relative_to(kept)) for p in kept.rglob("*")] == ["tasks", "tasks/late.txt"]  # the rest removed
    assert not (out / "tasks" / "late.txt").exists() and (out / "index.html").is_file()
