"""Results folders are untrusted input too (issue 46, the readers of runs): a run folder whose
``result.json`` is a FIFO, nested 200,000 deep, truncated, not an object, of the wrong types,
or beside an 8 GiB sparse ``events.jsonl``; text from a result that would drive the terminal;
``--json`` that must stay JSON. ``runner ls``, ``show``, ``leaderboard`` and ``compare`` list
the bad run as unreadable in one line, never hang, never hide the good run, never print a
control character or rich markup taken from the data."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from synthetic_result import edit_result, make_result_folder, new_signer, stage_mnist_stand_in

from runner.bundle import make_bundle
from runner.fingerprint import capture_host
from tests.hostile.hostile_helpers import assert_one_line_error, run_cli

ENTRY = "mnist-cnn-cpu"
GOOD = "20261122T010203Z-s0-aaaaaa"
BAD = "20261123T010203Z-s1-bbbbbb"
# What a hostile result.json puts in its strings: a title set, a clear screen, colours, a bell,
# a bidi override, and rich markup (a colour and a link).
HOSTILE = "\x1b]0;owned\x07\x1b[2J\x1b[31mred\x1b[0m\u202etxt [red]x[/red] [link=http://evil]l[/link]"


@pytest.fixture(scope="module")
def board(tmp_path_factory):
    """A signed run that counts, under its own results folder; RUNNER_HOME stays the board's."""
    root = tmp_path_factory.mktemp("results-cases")
    home = root / "home"
    signer, keys = new_signer(root)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RUNNER_HOME", str(home))
        staged = stage_mnist_stand_in(home)
        good = make_result_folder(root / "made" / ENTRY / GOOD, staged, capture_host())
        edit_result(good, conforming=True, nonconforming_reasons=[])
        make_bundle(good, signer)
        yield {"good": good, "keys": keys, "signer": signer, "home": home}


def _results(board, tmp_path: Path) -> Path:
    """A results folder holding a copy of the good run (its verdict cached after the first)."""
    results = tmp_path / "results"
    shutil.copytree(board["good"], results / ENTRY / GOOD, symlinks=True)
    return results


def _bad_run(results: Path, text: str | None = None) -> Path:
    folder = results / ENTRY / BAD
    folder.mkdir(parents=True)
    if text is not None:
        (folder / "result.json").write_text(text)
    return folder


def _cli(capsys, monkeypatch, *argv: str) -> tuple[int, str, str, float]:
    monkeypatch.setenv("COLUMNS", "120")
    started = time.monotonic()
    code, out, err = run_cli(capsys, *argv)
    return code, out, err, time.monotonic() - started


def _ls(board, capsys, monkeypatch, results: Path, *more: str):
    return _cli(capsys, monkeypatch, "ls", "--results", str(results), "--trusted-keys", str(board["keys"]), *more)


def _strict(text: str) -> object:
    def refuse(name):
        raise AssertionError(f"{name} in --json output")
    return json.loads(text, parse_constant=refuse)


def _wrong_types(results: Path) -> str:
    data = json.loads((results / ENTRY / GOOD / "result.json").read_text())
    data.update(run_id=BAD, training=5, task=[], status=["complete"], seed="one")
    data["entry"]["name"] = 5
    return json.dumps(data)


def _good_with(results: Path, **changes) -> str:
    data = json.loads((results / ENTRY / GOOD / "result.json").read_text())
    data.update(run_id=BAD, **changes)
    return json.dumps(data)


CASES = {
    "nested 200,000 deep": (lambda r: "[" * 200_000 + "]" * 200_000, "nested deeper"),
    "truncated": (lambda r: _good_with(r)[:500], "not JSON"),
    "a JSON list": (lambda r: "[1, 2, 3]", "not an object"),
    "a JSON number": (lambda r: "5", "not an object"),
    "wrong types": (_wrong_types, "result.json"),
    "a non-finite number": (lambda r: _good_with(r).replace('"seed": 1', '"seed": 1e999', 1).replace(
        '"smoke": false', '"smoke": false, "x": 1e999', 1), "finite"),
    "not UTF-8": (lambda r: '{"run_id": "\xff"}', "UTF-8"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_an_unreadable_result_is_one_line_and_never_hides_the_others(board, capsys, monkeypatch, tmp_path, case):
    make, needle = CASES[case]
    results = _results(board, tmp_path)
    folder = _bad_run(results)
    text = make(results)
    (folder / "result.json").write_bytes(text.encode("utf-8", "surrogateescape") if case != "not UTF-8"
                                         else b'{"run_id": "\xff"}')
    code, out, err, seconds = _ls(board, capsys, monkeypatch, results)
    assert code == 0 and "Traceback" not in out + err, (out, err)
    assert seconds < 5, seconds
    assert "s0-aaaaaa" in out, out  # the good run is still listed
    unreadable = [line for line in out.splitlines() if BAD in line]
    assert len(unreadable) == 1 and needle in unreadable[0], out
    code, out, err, _ = _ls(board, capsys, monkeypatch, results, "--json")
    listing = _strict(out)
    assert [r["short_id"] for r in listing["runs"]] == ["s0-aaaaaa"]
    assert len(listing["skipped"]) == 1 and BAD in listing["skipped"][0]
    # show names the file and why, in one line
    code, out, err, _ = _cli(capsys, monkeypatch, "show", str(folder), "--trusted-keys", str(board["keys"]))
    assert_one_line_error(code, out, err, "result.json")
    # the leaderboard lists the good run and skips the bad one in one line
    code, out, err, seconds = _cli(capsys, monkeypatch, "leaderboard", "--results", str(results),
                                   "--trusted-keys", str(board["keys"]), "--json")
    assert code == 0 and "Traceback" not in out + err, (out, err)
    data = _strict(out)
    assert [r["run_id"] for r in data["reproductions"]] == [GOOD]
    assert len(data["skipped"]) == 1 and BAD in data["skipped"][0]
    assert seconds < 5, seconds
    # compare refuses it in one line
    code, out, err, _ = _cli(capsys, monkeypatch, "compare", str(results / ENTRY / GOOD), str(folder),
                             "--trusted-keys", str(board["keys"]), "--no-plot")
    assert_one_line_error(code, out, err, BAD)


@contextmanager
def _deadline(seconds: int):
    """Fail (rather than hang for ever) when the block outlives ``seconds``: an open() blocked on
    a FIFO is interrupted by the alarm, whose exception ends it (PEP 475)."""
    def expire(signum, frame):
        raise AssertionError(f"still blocked after {seconds} s")
    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_fifo_result_json_is_listed_as_unreadable_and_never_blocks(board, capsys, monkeypatch, tmp_path):
    results = _results(board, tmp_path)
    folder = _bad_run(results)
    os.mkfifo(folder / "result.json")
    with _deadline(10):
        code, out, err, _ = _ls(board, capsys, monkeypatch, results)
    assert code == 0 and "Traceback" not in out + err, (out, err)
    assert "s0-aaaaaa" in out
    assert [line for line in out.splitlines() if BAD in line and "FIFO" in line], out
    with _deadline(10):
        code, out, err, _ = _cli(capsys, monkeypatch, "leaderboard", "--results", str(results),
                                 "--trusted-keys", str(board["keys"]), "--json")
    assert code == 0, err
    assert any("FIFO" in s for s in _strict(out)["skipped"])
    with _deadline(10):
        code, out, err, _ = _cli(capsys, monkeypatch, "show", str(folder), "--trusted-keys", str(board["keys"]))
    assert_one_line_error(code, out, err, "FIFO")


def test_a_sparse_8_gib_events_file_does_not_slow_ls(board, capsys, monkeypatch, tmp_path):
    results = _results(board, tmp_path)
    events = results / ENTRY / GOOD / "events.jsonl"
    events.unlink()
    with open(events, "wb") as fh:
        fh.truncate(8 << 30)
    code, out, err, seconds = _ls(board, capsys, monkeypatch, results)
    assert code == 0 and "Traceback" not in out + err, (out, err)
    assert seconds < 5, seconds
    assert "s0-aaaaaa" in out and "events.jsonl" in out, out  # listed, and not verified: its events are too big
    code, out, err, seconds = _cli(capsys, monkeypatch, "show", str(results / ENTRY / GOOD),
                                   "--trusted-keys", str(board["keys"]))
    assert code == 0 and seconds < 5, (seconds, err)


def _hostile_run(board, results: Path) -> Path:
    folder = _bad_run(results)
    shutil.rmtree(folder)
    shutil.copytree(board["good"], folder, symlinks=True)
    edit_result(folder, run_id=BAD, entry__name=HOSTILE, entry__model=HOSTILE, status=HOSTILE,
                incomplete_reason=HOSTILE, conforming=False, nonconforming_reasons=[HOSTILE, "two"],
                task__metric=HOSTILE, hardware__profile=HOSTILE)
    return folder


def _assert_inert(out: str) -> None:
    for bad in ("\x1b", "\x07", "\u202e"):
        assert bad not in out, (bad, out)
    assert "\\x1b" in out, out  # shown, escaped


def test_text_from_a_result_never_drives_the_terminal(board, capsys, monkeypatch, tmp_path):
    results = _results(board, tmp_path)
    folder = _hostile_run(board, results)
    keys = str(board["keys"])
    monkeypatch.setenv("COLUMNS", "400")  # the escaped text is long: keep it on one line to find it
    code, out, err = run_cli(capsys, "ls", "--results", str(results), "--trusted-keys", keys)
    assert code == 0, err
    _assert_inert(out + err)
    assert "[red]x[/red]" in out.replace("\n", ""), out
    code, out, err = run_cli(capsys, "show", str(folder), "--trusted-keys", keys)
    assert code == 0, err
    _assert_inert(out + err)
    assert "[red]x[/red]" in out and "[link=http://evil]" in out, out
    code, out, err = run_cli(capsys, "leaderboard", "--results", str(results), "--trusted-keys", keys)
    assert code == 0, err
    for bad in ("\x1b", "\x07", "\u202e"):
        assert bad not in out + err, (bad, out)


def test_json_output_is_strict_json(board, capsys, monkeypatch, tmp_path):
    from runner.terminal import json_text

    assert _strict(json_text({"a": math.nan, "b": [math.inf, -math.inf, 1.5], "c": {"d": (math.nan,)}})) == {
        "a": None, "b": [None, None, 1.5], "c": {"d": [None]}}
    results = _results(board, tmp_path)
    keys = str(board["keys"])
    for argv in (("ls", "--results", str(results)), ("show", str(results / ENTRY / GOOD)),
                 ("leaderboard", "--results", str(results)), ("verify", str(results / ENTRY / GOOD))):
        code, out, err, _ = _cli(capsys, monkeypatch, *argv, "--trusted-keys", keys, "--json")
        assert "Traceback" not in err, err
        _strict(out)


def test_wrong_types_deep_in_a_result_are_unreadable_not_a_traceback(board, capsys, monkeypatch, tmp_path):
    results = _results(board, tmp_path)
    data = json.loads((results / ENTRY / GOOD / "result.json").read_text())
    backend = next(iter(data["inference"]))
    data.update(run_id=BAD)
    data["inference"][backend]["latency_ms"] = "fast"
    data["training"]["evaluations"] = 5
    _bad_run(results, json.dumps(data))
    code, out, err, _ = _ls(board, capsys, monkeypatch, results)
    assert code == 0 and "Traceback" not in out + err, (out, err)
    assert "s0-aaaaaa" in out and [line for line in out.splitlines() if BAD in line and "result.json" in line], out
    code, out, err, _ = _cli(capsys, monkeypatch, "show", str(results / ENTRY / BAD), "--trusted-keys",
                             str(board["keys"]))
    assert_one_line_error(code, out, err, "result.json")


def test_a_run_folder_that_is_a_link_is_listed_as_unreadable_never_followed(tmp_path):
    """A downloaded results folder may link a "run" (or a whole entry) to any folder of the
    reader's: the listings name the link and read nothing through it."""
    from runner.leaderboard.reproductions import load_reproductions
    from runner.runs import list_runs

    elsewhere = tmp_path / "elsewhere" / "20261110T000203Z-s1-00a0a1"
    elsewhere.mkdir(parents=True)
    (elsewhere / "result.json").write_text("{}")
    results = tmp_path / "results"
    (results / "mnist-cnn-cpu").mkdir(parents=True)
    (results / "mnist-cnn-cpu" / elsewhere.name).symlink_to(elsewhere)
    (results / "linked-entry").symlink_to(tmp_path / "elsewhere")
    rows, skipped = list_runs(results, None, [])
    assert rows == [] and len(skipped) == 2 and all("is a link" in s for s in skipped), skipped
    repros, skipped = load_reproductions(results, [])
    assert repros == [] and len(skipped) == 2 and all("is a link" in s for s in skipped), skipped
