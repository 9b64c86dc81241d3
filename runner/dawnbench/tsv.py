"""DAWNBench's per-epoch TSV, read as it is really written and written as the README says.

Published files differ from the README's ``epoch hours <accuracy...>``: columns in other
orders, a UTF-8 byte-order mark, CRLF line endings, blank lines, cells padded with spaces.
The reader takes every one of them; anything else is an error naming the file and line.
It streams: a file of millions of rows is read a line at a time, never held whole as text.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

from runner.dawnbench.claims import CurvePoint
from runner.errors import UserError
from runner.manifest.untrusted_yaml import MAX_NUMBER
from runner.safe_read import Unreadable, open_file

REQUIRED = ("epoch", "hours")


class FormatError(UserError):
    """A DAWNBench file that cannot be read: the message names the file and what is wrong."""

    def __init__(self, path: Path | str, what: str, fix: str | None = None):
        super().__init__(f"{path}: {what}", fix or "correct the file (format: DAWNBench's README)")
        self.path = str(path)


def read_text(path: Path) -> str:
    """The file's text without a byte-order mark and with ``\\n`` line endings."""
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise FormatError(path, f"cannot read it ({err.strerror or err})", "check the path and its permissions") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise FormatError(path, f"not UTF-8 text (byte {err.start})") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _number(path: Path, lineno: int, column: str, cell: str) -> float:
    try:
        value = float(cell)
    except ValueError:
        raise FormatError(path, f"line {lineno}: {column} is {cell!r}, not a number") from None
    if not math.isfinite(value):
        raise FormatError(path, f"line {lineno}: {column} is {cell!r}, not a finite number")
    if abs(value) > MAX_NUMBER:  # hours x costPerHour would overflow to infinity
        raise FormatError(path, f"line {lineno}: {column} is {value:.3g}, larger than {MAX_NUMBER:g}")
    return value


def _lines(path: Path):
    """(line number, text) of each non-blank line, read as ``read_text`` reads the whole file
    (BOM dropped, any line ending), one line at a time."""
    try:
        raw, _ = open_file(path, "text")  # a regular file within its cap: a FIFO never blocks
    except Unreadable as err:
        raise FormatError(path, err.why, "check the path and its permissions") from None
    try:
        with io.TextIOWrapper(raw, encoding="utf-8-sig", newline=None) as fh:
            for lineno, line in enumerate(fh, start=1):
                if line.strip():
                    yield lineno, line.rstrip("\n")
    except OSError as err:
        raise FormatError(path, f"cannot read it ({err.strerror or err})", "check the path and its permissions") from None
    except UnicodeDecodeError:
        raise FormatError(path, "not UTF-8 text") from None


def read_curve(path: Path, needed: tuple[str, ...]) -> list[CurvePoint]:
    """Rows in file order; ``needed`` accuracy columns must be present (others are kept)."""
    lines = _lines(path)
    first = next(lines, None)
    if first is None:
        raise FormatError(path, "empty: no header and no rows")
    header = [cell.strip() for cell in first[1].split("\t")]
    missing = [c for c in (*REQUIRED, *needed) if c not in header]
    if missing:
        raise FormatError(
            path, f"header {' '.join(header)!r} lacks column(s) {', '.join(missing)} (tab-separated)"
        )
    if len(set(header)) != len(header):
        raise FormatError(path, f"header {' '.join(header)!r} repeats a column")
    points = []
    for lineno, line in lines:
        cells = [cell.strip() for cell in line.split("\t")]
        if len(cells) != len(header):
            raise FormatError(path, f"line {lineno}: {len(cells)} cells for {len(header)} columns")
        values = {col: _number(path, lineno, col, cell) for col, cell in zip(header, cells)}
        epoch = values.pop("epoch")  # fractional in some files (1.00096, 2.9)
        hours = values.pop("hours")
        if hours < 0:
            raise FormatError(path, f"line {lineno}: hours is negative ({hours})")
        points.append(CurvePoint(int(epoch) if epoch.is_integer() else epoch, hours, values))
    if not points:
        raise FormatError(path, "no rows after the header")
    return points


def format_epoch(epoch: float) -> str:
    return str(int(epoch)) if float(epoch).is_integer() else repr(float(epoch))


def write_curve(path: Path, columns: tuple[str, ...], points: list[CurvePoint]) -> None:
    """README's layout: ``epoch hours <columns>``, tab-separated, LF line endings."""
    rows = ["\t".join(("epoch", "hours", *columns))]
    for p in points:
        rows.append("\t".join((format_epoch(p.epoch), repr(p.hours), *(repr(p.scores[c]) for c in columns))))
    path.write_text("\n".join(rows) + "\n")
