"""runner.safe_read: the one way the runner reads a file someone else may have written."""

from __future__ import annotations

import os
import resource
import time

import pytest

from runner import safe_read
from runner.safe_read import Unreadable


def _refused(path, kind="json", **kw) -> str:
    with pytest.raises(Unreadable) as err:
        safe_read.read_json(path, kind, **kw)
    message = str(err.value)
    assert "\n" not in message and str(path) in message
    return message


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "result.json")
    started = time.monotonic()
    assert "FIFO" in _refused(tmp_path / "result.json", "result")
    assert time.monotonic() - started < 1


def test_a_link_is_refused_and_one_leading_outside_the_folder_named(tmp_path):
    (tmp_path / "outside.json").write_text("{}")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "result.json").symlink_to(tmp_path / "outside.json")
    assert "link" in _refused(tmp_path / "run" / "result.json", "result")
    assert "outside" in _refused(tmp_path / "run" / "result.json", "result", inside=tmp_path / "run")


def test_json_nested_200000_deep_is_one_line_not_a_recursion_error(tmp_path):
    path = tmp_path / "result.json"
    path.write_text("[" * 200_000 + "]" * 200_000)
    assert "nested deeper" in _refused(path, "result")
    path.write_text('{"a": "' + "[" * 500 + '"}')  # brackets inside a string are not nesting
    assert safe_read.read_json(path) == {"a": "[" * 500}


@pytest.mark.parametrize("text,words", [('{"a": NaN}', "NaN"), ('{"a": -Infinity}', "Infinity"),
                                        ('{"a": 1e999}', "not a finite number"), ('{"a": ' + "9" * 5000 + "}", "digits"),
                                        ('{"a": 1', "not JSON")])
def test_json_holds_finite_bounded_numbers_only(tmp_path, text, words):
    (tmp_path / "r.json").write_text(text)
    assert words in _refused(tmp_path / "r.json")


def test_text_is_strict_utf8(tmp_path):
    (tmp_path / "r.json").write_bytes(b'{"a": "\xff"}')
    assert "not UTF-8" in _refused(tmp_path / "r.json")


def test_a_sparse_giant_is_refused_by_its_size_before_a_byte_is_read(tmp_path):
    path = tmp_path / "result.json"
    with open(path, "wb") as fh:
        fh.truncate(4 << 30)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.monotonic()
    assert "4.0 GiB" in _refused(path, "result")
    assert time.monotonic() - started < 1
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 100 * 1024  # KiB


def test_lines_stream_and_a_giant_line_is_named(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text("one\ntwo\n")
    assert list(safe_read.iter_lines(path)) == ["one", "two"]
    path.write_bytes(b"x" * (safe_read.MAX_LINE + 10))
    with pytest.raises(Unreadable, match="line 1 is longer"):
        list(safe_read.iter_lines(path))


def test_control_characters_are_made_visible():
    shown = safe_read.visible("ok\x1b]0;pwned\x07\x1b[2J\u202eevil\ttab")
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown
    assert shown == "ok\\x1b]0;pwned\\x07\\x1b[2J\\u202eevil\ttab"
