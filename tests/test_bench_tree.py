"""``runner bench tree``: it measures on a tree of the official layout it makes itself, and
the changed-in-place file it plants (same size, same mtime) is named by the full check."""

from __future__ import annotations

import re

from runner.cli import main


def test_the_tree_benchmark_prints_its_figures_and_names_the_changed_file(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("RUNNER_HOME", str(tmp_path / "home"))  # the user's staged data is never touched
    assert main(["bench", "tree", "--images", "300", "--classes", "6", "--size", "16"]) == 0
    out = capsys.readouterr().out
    assert "training tree: 300 JPEGs of 16x16 px, 6 classes" in out
    for measure in ("import the tar", "import the unpacked folder", "per-run check (median of 3)",
                    "full check", "by hand: tar -xf all, sha256sum all"):
        assert re.search(rf"{re.escape(measure)}\s*│\s*\d+\.\d\d", out), measure
    assert "detected: n00000000/n00000000_0.JPEG has different contents" in out
    assert not (tmp_path / "home").exists()
