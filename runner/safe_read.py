"""One safe way to read a file someone else may have written.

Results folders, bundles, key folders, study reports and entry folders are untrusted input:
a downloaded bundle or a colleague's results folder may hold a FIFO where a ``result.json``
should be, a sparse file of many gigabytes, JSON nested 200,000 deep, ``NaN``, or text that
drives the terminal. Every reader of such a file goes through this module:

* only a regular file is opened (a FIFO, device or socket is refused without blocking: the
  open is non-blocking and the kind is checked on the open descriptor);
* a link at the last component is refused, and with ``inside=ROOT`` a path that resolves
  outside ROOT is refused;
* each kind of file has a size cap, checked on the apparent size before a byte is read and
  again while reading (a file that grows is not read past its cap);
* JSON is depth-capped (never ``RecursionError``), has finite numbers only and bounded
  integers; text is decoded strictly as UTF-8.

Each refusal is an ``Unreadable`` (a ``UserError``): one line naming the file and why.
``visible`` makes the control characters of a string from such a file visible before it
reaches a terminal.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from runner.errors import UserError

KiB, MiB = 1 << 10, 1 << 20
# The most bytes each kind of file may hold (its apparent size). A cap is the largest such
# file an honest run writes, with room: a result.json is a few tens of KiB, an events file of
# 100,000 events a few tens of MiB.
LIMITS = {
    "result": 16 * MiB,  # result.json
    "report": 32 * MiB,  # a study's report.json
    "key": 64 * KiB,  # a public or private key file
    "json": 16 * MiB,  # any other small JSON record (verdict cache, measured record, manifest)
    "ledger": 64 * MiB,  # a key's ledger chain
    "events": 512 * MiB,  # events.jsonl (read as a stream of lines)
    "text": 16 * MiB,  # a text file read whole
    "plot": 32 * MiB,  # a PNG of a study, copied into the leaderboard's site
    "data": 1 << 40,  # a file that is streamed and digested, never held (a checkpoint, a tarball)
}
MAX_DEPTH = 64
MAX_INT_DIGITS = 40
MAX_LINE = 1 * MiB
_CHUNK = 1 * MiB


class Unreadable(UserError):
    """A file the runner will not read, and why, on one line."""

    def __init__(self, path: Path | str, why: str, fix: str | None = None):
        self.path = Path(path)
        self.why = why
        super().__init__(f"{visible(str(path))}: {why}", fix)


def kind_of(mode: int) -> str:
    """What a file is, in words."""
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device"), (stat.S_ISDIR, "folder"), (stat.S_ISLNK, "link")):
        if test(mode):
            return name
    return "regular file" if stat.S_ISREG(mode) else "special file"


def limit_of(kind: str) -> int:
    try:
        return LIMITS[kind]
    except KeyError:
        raise ValueError(f"no size cap for files of kind {kind!r}: one of {', '.join(LIMITS)}") from None


def _check(path: Path, st: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise Unreadable(path, f"is a {kind_of(st.st_mode)}, not a regular file")
    if st.st_size > limit:
        raise Unreadable(path, f"is {_size(st.st_size)} (its apparent size), over the {_size(limit)} a file of this kind may hold")


def size_text(n: int) -> str:
    """``n`` bytes in words (``4.0 GiB``), as the refusals say it."""
    return _size(n)


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", MiB), ("KiB", KiB)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _inside(path: Path, root: Path) -> None:
    try:
        resolved, base = path.resolve(strict=False), root.resolve(strict=False)
    except (OSError, RuntimeError) as exc:
        raise Unreadable(path, f"cannot be resolved ({exc})") from None
    if resolved != base and base not in resolved.parents:
        raise Unreadable(path, f"leads outside {visible(str(root))} (a link)")


def open_file(path: Path | str, kind: str, inside: Path | None = None) -> tuple[BinaryIO, int]:
    """``(binary file open for reading, size)`` for ``path``, a regular file within the cap of
    ``kind`` (and, with ``inside``, resolving inside that folder); ``Unreadable`` otherwise.
    Never blocks, never follows a link at the last component."""
    path = Path(path)
    limit = limit_of(kind)
    if inside is not None:
        _inside(path, inside)
    before = _lstat_checked(path, limit)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise Unreadable(path, _strerror(exc)) from None
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
            raise Unreadable(path, "was replaced while the runner opened it")
        _check(path, now, limit)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), now.st_size
    except BaseException:
        os.close(fd)
        raise


def _strerror(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "does not exist"
    if isinstance(exc, PermissionError):
        return "cannot be read (permission denied)"
    return f"cannot be read ({exc.strerror or exc})"


def read_bytes(path: Path | str, kind: str, inside: Path | None = None) -> bytes:
    """The whole of a capped file (``open_file``)."""
    fh, size = open_file(path, kind, inside)
    limit = limit_of(kind)
    with fh:
        try:
            # its size and one byte more: a read of ``limit + 1`` would allocate the whole cap
            # (16 MiB for a 1 KiB file); a file that grew is read on, up to its cap
            data = fh.read(size + 1)
            if len(data) > size:
                data += fh.read(limit + 1 - len(data))
        except OSError as exc:
            raise Unreadable(path, _strerror(exc)) from None
    if len(data) > limit:
        raise Unreadable(path, f"grew past {_size(limit)} while it was read")
    return data


def iter_chunks(path: Path | str, kind: str = "data", inside: Path | None = None,
                chunk: int = _CHUNK) -> Iterator[bytes]:
    """The file in chunks of at most ``chunk`` bytes (1 MiB), never past the size it had when opened."""
    fh, size = open_file(path, kind, inside)
    with fh:
        left = size
        while left > 0:
            try:
                piece = fh.read(min(chunk, left))
            except OSError as exc:
                raise Unreadable(path, _strerror(exc)) from None
            if not piece:
                return
            left -= len(piece)
            yield piece


def read_text(path: Path | str, kind: str = "text", inside: Path | None = None) -> str:
    """A capped file decoded strictly as UTF-8."""
    raw = read_bytes(path, kind, inside)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Unreadable(path, f"is not UTF-8 text (byte {exc.start})") from None


def iter_lines(path: Path | str, kind: str = "events", inside: Path | None = None) -> Iterator[str]:
    """The file's lines (without their ends), streamed; a line over 1 MiB or not UTF-8 is
    refused with its number."""
    fh, size = open_file(path, kind, inside)
    with fh:
        number, left = 0, size
        while left > 0:
            line = fh.readline(min(MAX_LINE + 1, left))
            if not line:
                return
            left -= len(line)
            number += 1
            if len(line) > MAX_LINE:
                raise Unreadable(path, f"line {number} is longer than {_size(MAX_LINE)}")
            try:
                yield line.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise Unreadable(path, f"line {number} is not UTF-8 text") from None


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"holds an integer of {len(text)} digits")
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"holds {text[:20]}, not a finite number")
    return value


def _no_constant(name: str):
    raise ValueError(f"holds {name}, not a number")


def depth_of(obj: object, limit: int = MAX_DEPTH) -> int:
    """The nesting depth of parsed JSON up to ``limit + 1``, walked without recursion."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth > limit:
                return depth
            stack.extend((v, depth + 1) for v in (item.values() if isinstance(item, dict) else item))
    return deepest


def parse_json(text: str | bytes, what: Path | str = "JSON") -> object:
    """``text`` as JSON with finite numbers, bounded integers and at most ``MAX_DEPTH`` levels;
    ``Unreadable`` naming ``what`` otherwise."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise Unreadable(what, f"is not UTF-8 text (byte {exc.start})") from None
    if _bracket_depth(text) > MAX_DEPTH:
        raise Unreadable(what, f"is JSON nested deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(text, parse_int=_bounded_int, parse_float=_finite_float, parse_constant=_no_constant)
    except RecursionError:
        raise Unreadable(what, f"is JSON nested deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise Unreadable(what, f"is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    except ValueError as exc:
        raise Unreadable(what, str(exc)) from None
    if depth_of(value) > MAX_DEPTH:
        raise Unreadable(what, f"is JSON nested deeper than {MAX_DEPTH} levels")
    return value


_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.S)


def _bracket_depth(text: str) -> int:
    """The deepest nesting of brackets outside strings (a cheap pass before ``json.loads``,
    which would recurse once a level)."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return 0
    depth = deepest = 0
    for match in _BRACKETS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_DEPTH:
                    return deepest
        elif token in "]}":
            depth -= 1
    return deepest


def read_json(path: Path | str, kind: str = "json", inside: Path | None = None) -> object:
    """A capped file of JSON (``parse_json``)."""
    return parse_json(read_text(path, kind, inside), path)


def read_json_object(path: Path | str, kind: str = "json", inside: Path | None = None) -> dict:
    """``read_json`` when the document is an object; ``Unreadable`` otherwise."""
    value = read_json(path, kind, inside)
    if not isinstance(value, dict):
        raise Unreadable(path, f"holds a JSON {type(value).__name__}, not an object")
    return value


def size_of(path: Path | str) -> int:
    """The apparent size of a regular file (``Unreadable`` for anything else), without opening it."""
    return check_size(path, "data")


def check_size(path: Path | str, kind: str) -> int:
    """The apparent size of ``path`` when it is a regular file (not a link) within the cap of
    ``kind``; ``Unreadable`` otherwise. One ``lstat``, nothing opened: what a caller checks of
    many files before it reads any (``runner ls`` over a hundred runs)."""
    return _lstat_checked(Path(path), limit_of(kind)).st_size


def _lstat_checked(path: Path, limit: int) -> os.stat_result:
    """``path``'s own status (a link is not followed) when it is a regular file of at most
    ``limit`` bytes; ``Unreadable`` otherwise."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise Unreadable(path, _strerror(exc)) from None
    if stat.S_ISLNK(st.st_mode):
        raise Unreadable(path, "is a link; the runner reads no link in a folder it did not write")
    _check(path, st, limit)
    return st


# C0 and C1 controls (tab excepted), DEL, and the bidirectional overrides and isolates that
# reorder what a terminal shows.
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character written out (``\\x1b``, ``\\u202e``): a string
    from a result, bundle or report can then never drive the terminal it is printed on."""
    return _CONTROLS.sub(_escape, text) if isinstance(text, str) else text


def object_field(record: dict, key: str) -> dict:
    """``record[key]`` where it is a JSON object, else an empty one (a record read from a file
    is not trusted to have the shape it should)."""
    value = record.get(key)
    return value if isinstance(value, dict) else {}
