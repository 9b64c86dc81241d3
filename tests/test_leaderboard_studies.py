"""``runner.leaderboard.studies``: a study's report as the site reads it, and what it refuses.

The real studies and the site built from them are tested with the engine in
tests/test_studies.py; here, hand-made report folders: a report the site can show, and ones
it must not show as they are (links, paths of the host, a PNG that is not one, a report of
another entry or of no known shape).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from runner.leaderboard.studies import MAX_REPORT_BYTES, PNG_MAGIC, load_studies, read_study, scrub

ENTRY = "mnist-cnn-cpu"


def _study(results: Path, name: str = "lesion-20261124T230000Z", **changes) -> Path:
    folder = results / ENTRY / "studies" / name
    folder.mkdir(parents=True)
    (folder / "lesion.png").write_bytes(PNG_MAGIC + b"\0" * 64)
    report = {
        "schema_version": 1, "kind": "lesion", "entry": ENTRY, "written_at": "2026-11-24T23:00:00Z",
        "tables": [{"title": "Lesion study", "headers": ["variant", "median TTA s"],
                    "rows": [["full recipe", "18.3"], ["without one-cycle", "25.1"]]}],
        "plots": [{"file": "lesion.png", "caption": "median TTA per variant"}],
        "notes": ["one-cycle (software): off - constant lr"],
        "runs": ["20261124T230000Z-s1-aaaaaa"],
    } | changes
    (folder / "report.json").write_text(json.dumps(report))
    return folder


def test_a_report_is_read_with_its_tables_plots_notes_and_runs(tmp_path):
    study = read_study(_study(tmp_path), ENTRY)
    assert (study.kind, study.name, study.written_at) == ("lesion", "lesion-20261124T230000Z", "2026-11-24T23:00:00Z")
    assert study.tables[0].rows == [["full recipe", "18.3"], ["without one-cycle", "25.1"]]
    assert [(p.name, caption) for p, caption in study.plots] == [("lesion.png", "median TTA per variant")]
    assert study.runs == ["20261124T230000Z-s1-aaaaaa"] and study.left_out == []


def test_absolute_paths_of_the_host_are_cut_to_their_last_part(tmp_path):
    home = str(tmp_path / "home" / "me" / "results" / ENTRY / "20261124T230000Z-s1-aaaaaa")
    assert scrub(f"non-conforming run {home}: steal") == "non-conforming run 20261124T230000Z-s1-aaaaaa: steal"
    assert scrub("see https://dawn.cs.stanford.edu/benchmark/ and entries/mnist-cnn-cpu") == (
        "see https://dawn.cs.stanford.edu/benchmark/ and entries/mnist-cnn-cpu")
    folder = _study(tmp_path, notes=[f"reference run {home}"],
                    tables=[{"title": f"from {tmp_path}/x", "headers": ["a"], "rows": [[f"{tmp_path}/y/z"]]}])
    study = read_study(folder, ENTRY)
    text = json.dumps([study.notes, study.tables[0].title, study.tables[0].rows])
    assert str(tmp_path) not in text and "20261124T230000Z-s1-aaaaaa" in text


@pytest.mark.parametrize("plot, why", [
    ("../../../../etc/passwd.png", "not a PNG file name of the study's folder"),
    ("linked.png", "not a regular file of the study's folder"),
    ("fake.png", "not a PNG"),
    ("absent.png", "not a regular file of the study's folder"),
])
def test_a_plot_that_is_not_the_studys_own_png_is_left_out_with_why(tmp_path, plot, why):
    folder = _study(tmp_path, plots=[{"file": "lesion.png", "caption": "ok"}, {"file": plot, "caption": "bad"}])
    (folder / "fake.png").write_text("<svg onload=alert(1)>")
    outside = tmp_path / "secret.png"
    outside.write_bytes(PNG_MAGIC + b"host file")
    os.symlink(outside, folder / "linked.png")
    study = read_study(folder, ENTRY)
    assert [p.name for p, _ in study.plots] == ["lesion.png"]
    (left,) = study.left_out
    assert why in left and str(tmp_path) not in left


@pytest.mark.parametrize("change, problem", [
    ({"entry": "another-entry"}, "names entry 'another-entry'"),
    ({"schema_version": 9}, "not a study report of schema version 1"),
    ({"kind": "<script>"}, "its kind is not a study's name"),
    ({"tables": [{"title": "t", "headers": ["a"], "rows": [[{"nested": 1}]]}]}, "a table's row is not a list of strings"),
    ({"runs": "all"}, "its runs is not a list of strings"),
])
def test_a_report_of_another_shape_or_entry_is_skipped_with_the_reason(tmp_path, change, problem):
    _study(tmp_path, **change)
    studies, skipped = load_studies(tmp_path)
    assert studies == [] and len(skipped) == 1
    assert skipped[0].startswith(f"study {ENTRY}/lesion-20261124T230000Z: ") and problem in skipped[0], skipped


def test_a_study_without_a_report_an_oversized_one_or_a_linked_one_is_skipped(tmp_path):
    old = tmp_path / ENTRY / "studies" / "stability-20261101T000000Z"
    old.mkdir(parents=True)
    (old / "summary.json").write_text("{}")
    big = _study(tmp_path, name="lesion-20261124T230001Z")
    (big / "report.json").write_bytes(b" " * (MAX_REPORT_BYTES + 1))
    linked = _study(tmp_path, name="lesion-20261124T230002Z")
    (linked / "report.json").unlink()
    os.symlink(_study(tmp_path / "elsewhere") / "report.json", linked / "report.json")
    good = _study(tmp_path, name="lesion-20261124T230003Z")
    os.symlink(good, tmp_path / ENTRY / "studies" / "lesion-20261124T230004Z")  # a linked folder: not listed
    studies, skipped = load_studies(tmp_path)
    assert [s.name for s in studies] == [good.name]
    assert [s.split(":")[0] for s in skipped] == [f"study {ENTRY}/{f.name}" for f in (big, linked, old)]
    assert "re-run it with --from-runs" in skipped[2] and "over 2 MiB" in skipped[0]
