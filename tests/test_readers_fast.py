"""``runner ls`` and ``runner show`` at once (issue 50, item 4): a listing whose rows are cached
(``runner.runs.cache``) loads neither the verifier nor the signing libraries nor any inference
backend, and the cache never says what the files and the verifier would not say again: an
edited folder, a corrupt entry or an entry filed for another folder is a miss, judged afresh.
Real signed runs (``tests/synthetic_result.py``), the real CLI (timings: ``runner bench readers``)."""

from __future__ import annotations

import json
import shutil

import pytest
from synthetic_result import edit_result, make_result_folder, new_signer, stage_mnist_stand_in
from tests.hostile.hostile_helpers import run_cli

from runner.bench.cli import modules_loaded
from runner.bundle import make_bundle
from runner.fingerprint import capture_host
from runner.runs import cache

ENTRY = "mnist-cnn-cpu"
HONEST, FORGED = "20261122T010203Z-s0-aaaaaa", "20261123T010203Z-s5-c0997d"
# What a listing read from its cache must not load: the verifier and its recomputations, the
# schema validator, the inference backends, the signing libraries.
NOT_FOR_READERS = ("jsonschema", "onnx", "onnxruntime", "torch", "tensorflow", "numpy", "scipy", "matplotlib",
                   "docker", "securesystemslib", "cryptography", "runner.verify.checks", "runner.bundle",
                   "runner.keys", "runner.inference", "runner.harness", "runner.plan", "runner.entry_build")


@pytest.fixture
def board(tmp_path, monkeypatch):
    """results/: an honest signed run, and a run edited after it was signed (not verified)."""
    results, home = tmp_path / "results", tmp_path / "home"
    monkeypatch.setenv("RUNNER_HOME", str(home))
    monkeypatch.setenv("COLUMNS", "80")
    signer, keys = new_signer(tmp_path)
    staged, host = stage_mnist_stand_in(home), capture_host()
    for name, seed in ((HONEST, 0), (FORGED, 5)):
        folder = make_result_folder(results / ENTRY / name, staged, host, seed=seed)
        edit_result(folder, conforming=True, nonconforming_reasons=[])
        make_bundle(folder, signer)
    edit_result(results / ENTRY / FORGED, training__tta_seconds=0.5)  # after signing: a forgery
    return {"results": results, "keys": keys, "home": home,
            "argv": ("--results", str(results), "--trusted-keys", str(keys))}


def _ls(capsys, board) -> dict[str, str]:
    code, out, err = run_cli(capsys, "ls", *board["argv"], "--json")
    assert code == 0, err
    return {row["run_id"]: row["verdict"] for row in json.loads(out)["runs"]}


def _entries(board) -> list:
    return sorted((board["home"] / cache.CACHE_DIR).rglob("*.json"))


def heavy_loaded(loaded: list[str]) -> list[str]:
    return sorted({m for m in loaded for h in NOT_FOR_READERS if m == h or m.startswith(h + ".")})


def test_ls_and_show_of_cached_rows_load_no_verifier_backend_or_signing_library(board, capsys):
    first = _ls(capsys, board)  # judges both runs, keeps their rows
    assert first == {HONEST: "counts", FORGED: "not verified"}
    loaded = modules_loaded("ls", *board["argv"])
    assert heavy_loaded(loaded) == [], "runner ls with every row cached"
    shown = modules_loaded("show", "s0-aaaaaa", *board["argv"])
    assert "runner.runs.show" in shown
    assert heavy_loaded(shown) == [], "runner show of a cached run"
    shutil.rmtree(board["home"] / cache.CACHE_DIR)  # nothing kept: the forgery is judged again, by the verifier
    assert "runner.verify.checks" in heavy_loaded(modules_loaded("ls", *board["argv"]))


def test_the_check_sees_a_heavy_module():
    """The list above finds what a listing that judges a run loads (the verifier)."""
    assert heavy_loaded(["numpy.core", "runner.verify.checks", "runner.keys.trust", "rich"]) == [
        "numpy.core", "runner.keys.trust", "runner.verify.checks"]


def test_a_cached_listing_says_what_a_fresh_one_says(board, capsys):
    fresh = _ls(capsys, board)
    assert len(_entries(board)) == 2, "one row kept per run, the failure too"
    assert _ls(capsys, board) == fresh
    code, out, _ = run_cli(capsys, "show", "s5-c0997d", *board["argv"])
    assert code == 0 and "not verified" in out


def test_an_edited_folder_is_judged_again(board, capsys):
    assert _ls(capsys, board)[HONEST] == "counts"
    edit_result(board["results"] / ENTRY / HONEST, training__tta_seconds=0.25)
    assert _ls(capsys, board)[HONEST] == "not verified"
    assert len(_entries(board)) == 2, "the row of the folder as it was is gone"


def test_another_trusted_key_is_another_listing(board, capsys, tmp_path):
    assert _ls(capsys, board)[HONEST] == "counts"
    (tmp_path / "other").mkdir()
    _, other = new_signer(tmp_path / "other")
    code, out, _ = run_cli(capsys, "ls", "--results", str(board["results"]), "--trusted-keys", str(other), "--json")
    assert code == 0
    assert {r["verdict"] for r in json.loads(out)["runs"]} == {"not verified"}


def test_a_corrupt_or_misfiled_cache_entry_is_a_miss(board, capsys):
    assert _ls(capsys, board) == {HONEST: "counts", FORGED: "not verified"}
    rows = {json.loads(p.read_text())["row"]["run_id"]: p for p in _entries(board)}
    # the honest run's row (it counts) filed under the forged run's key: it names another key
    shutil.copyfile(rows[HONEST], rows[FORGED])
    assert _ls(capsys, board)[FORGED] == "not verified"
    # the forged run's own entry, its key kept and its row made to say "counts": not a row
    data = json.loads(rows[FORGED].read_text())
    data["row"] = {"counts": True}
    rows[FORGED].write_text(json.dumps(data))
    rows[HONEST].write_text("{not json")
    assert _ls(capsys, board) == {HONEST: "counts", FORGED: "not verified"}


def test_a_cache_that_cannot_be_written_still_lists(board, capsys):
    (board["home"] / cache.CACHE_DIR).write_text("")  # a file where the cache's folder would be
    assert _ls(capsys, board) == {HONEST: "counts", FORGED: "not verified"}
    assert _ls(capsys, board) == {HONEST: "counts", FORGED: "not verified"}


def test_a_key_file_broken_since_the_rows_were_kept_is_said(board, capsys):
    assert _ls(capsys, board)[HONEST] == "counts"
    board["keys"].write_text("{not json")
    code, _, err = run_cli(capsys, "ls", *board["argv"])
    assert code == 2 and str(board["keys"]) in err and len(err.splitlines()) == 1


def test_the_benchmarks_reason_for_not_timing_is_printed_whole():
    """Its fix names the test extra, `.[test]`, which a console would read as markup."""
    from io import StringIO

    from rich.console import Console

    from runner.bench.readers import print_views

    out = StringIO()
    print_views(Console(file=out, width=200), "not timed: they need the test extra: pip install -e '.[test]'", 100)
    assert "pip install -e '.[test]'" in out.getvalue()
