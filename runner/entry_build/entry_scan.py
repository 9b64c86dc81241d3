"""Data hidden in the entry's own files (threat-model class 4), read statically on the host.

An author who wants a certificate for a model trained beforehand can paste its weights into
the code: a base64 or hex constant, a list of numbers, a ``b"\\x.."`` literal, split over
thousands of short lines or string concatenations so that no single line looks long. The
runner reads every file of the entry folder and measures the data such literals carry:

* each line is cut into *data tokens*: base64 (mixed-case letters and digits, changing
  case or class as random text does), base32, hex, numbers, ``\\x``/octal/``\\u`` escapes,
  non-ASCII runs;
* a line is a *data line* when it carries at least ``LINE_MIN_BYTES`` and its tokens cover
  half of its visible characters (so ``w = "..."`` or ``"...",`` still count); consecutive
  data lines (blank lines and lines of brackets or quotes between them too) form one *run*,
  however the author split them, and a short line (a row's last number, a base64 chunk
  that happens to lack a digit) continues a run;
* the other lines are cut into blocks of ``BLOCK_CHARS`` visible characters: a block zlib
  cannot shrink below ``BLOCK_RATIO`` is data whatever its alphabet (base85, latin-1...),
  counted at its compressed size;
* each token counts the bytes it decodes to (base64 3/4 of its characters, hex 1/2, a
  decimal digit log2(10)/8, an escape one byte); a file that is not text counts whole.

A run over ``RUN_LIMIT_BYTES``, or data lines over ``TOTAL_LIMIT_BYTES`` in all the entry's
files, is a class 4 finding naming the file, the lines and the size (the run contract has
the figures). Separately, entry code that reaches into the runner's harness (the evaluator
imports the entry's builder into the harness process) is a finding whatever its size.
"""

from __future__ import annotations

import math
import re
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

from runner import safe_read

# One embedded run over this many decoded bytes is a finding: a useful MNIST model fits in
# about 20 KB of fp16 weights, and the project's own entries embed nothing near it.
RUN_LIMIT_BYTES = 8 * 1024
# Data lines in all the entry's files over this many decoded bytes is a finding too (a model
# split over many files or separated runs).
TOTAL_LIMIT_BYTES = 16 * 1024
# Runs at least this large are listed in image-audit.json even when under the limits.
LIST_MIN_BYTES = 256
# Data lines over this many bytes in all: the finding is certain, the rest of the files are
# not cut into tokens (``scan_entry``), only searched for reaches into the harness.
SCAN_STOP_BYTES = 4 * TOTAL_LIMIT_BYTES
LINE_MIN_BYTES = 8
LINE_MIN_COVER = 0.5
RELAXED_COVER = 0.75
# The catch-all for alphabets the tokens miss (base85, ascii85, latin-1 or CJK strings...):
# the lines that are not data lines, cut into blocks of BLOCK_CHARS visible characters, are
# data when zlib cannot shrink a block below BLOCK_RATIO of its size. Code and prose stay
# under 0.69 (0.58 for 999 blocks in 1,000 of this project's and its packages' sources);
# random data in any of those alphabets is over 0.76.
BLOCK_CHARS = 2048
BLOCK_RATIO = 0.72
_DIGIT_BYTES = math.log2(10) / 8

_TOKEN = re.compile(
    r"(?P<esc>(?:\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3})"
    r"(?:[^\\'\"\n]{1,3}(?=\\))?)+)"
    r"|(?P<hexnum>\b0[xX][0-9a-fA-F]+\b)"
    r"|(?P<word>[A-Za-z0-9+/_-]{16,}={0,2})"
    r"|(?P<num>(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w]))"
    r"|(?P<wide>[^\x00-\x7f]+)"
)
_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3})")
_HEX = re.compile(r"[0-9a-fA-F]+")
_GLUE = " \t[](){},;'\"+\\"
_BASE32 = re.compile(r"[A-Z2-7]+=*")

# Reaching into the runner's harness from the entry's code: the evaluator imports the
# entry's builder inside the harness process, so such code could patch the scorer.
_HARNESS = [
    (re.compile(r"^\s*(?:from\s+harness\b|import\s+(?:[\w.]+\s*,\s*)*harness\b)", re.M), "imports the harness"),
    (re.compile(r"""['"]harness(?:\.[\w.]*)?['"]"""), "names the harness module"),
    (re.compile(r"/opt/runner\b"), "names the runner's mount /opt/runner"),
    (re.compile(r"\bsys\.modules\b.*harness|\bsys\.modules\.(?:values|items)\b"),
     "searches sys.modules"),
    (re.compile(r"\bsys\._getframe\b|\.f_back\b|\binspect\.(?:stack|currentframe|getouterframes)\b"),
     "walks its caller's frames"),
    (re.compile(r"\bgc\.get_(?:objects|referrers)\b"), "searches the interpreter's objects"),
]


@dataclass
class EmbeddedRun:
    path: str
    line: int  # first line (1-based); 0 for a file that is not text
    last_line: int
    bytes: float  # what its literals decode to, about (whole bytes once its file is scanned)
    chars: int  # characters of the file it spans
    kinds: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        if not self.line:
            return self.path
        return f"{self.path} line {self.line}" + (f"-{self.last_line}" if self.last_line != self.line else "")


@dataclass
class HarnessReach:
    path: str
    line: int
    what: str
    text: str


@dataclass
class EntryScan:
    runs: list[EmbeddedRun] = field(default_factory=list)  # those of at least LIST_MIN_BYTES
    total_bytes: int = 0  # every data line of every file
    harness: list[HarnessReach] = field(default_factory=list)

    @property
    def oversized(self) -> list[EmbeddedRun]:
        return [r for r in self.runs if r.bytes > RUN_LIMIT_BYTES]

    def problem(self) -> str | None:
        """What makes the entry non-conforming (without the class prefix); None when nothing."""
        parts = []
        big = sorted(self.oversized, key=lambda r: -r.bytes)
        if big:
            named = ", ".join(f"{r.where} ({r.bytes} bytes of {'/'.join(r.kinds)})" for r in big[:5])
            more = f" and {len(big) - 5} more" if len(big) > 5 else ""
            parts.append(f"the entry's files embed data over {RUN_LIMIT_BYTES} bytes in one run: {named}{more}")
        elif self.total_bytes > TOTAL_LIMIT_BYTES:
            top = sorted(self.runs, key=lambda r: -r.bytes)[:5]
            named = ", ".join(f"{r.where} ({r.bytes} bytes)" for r in top)
            parts.append(f"the entry's files embed {self.total_bytes} bytes of data in all "
                         f"(over {TOTAL_LIMIT_BYTES}): {named}")
        if self.harness:
            named = ", ".join(f"{h.path} line {h.line} ({h.what})" for h in self.harness[:5])
            more = f" and {len(self.harness) - 5} more" if len(self.harness) > 5 else ""
            parts.append(f"the entry's code reaches into the runner's harness: {named}{more}")
        return "; ".join(parts) or None

    def to_dict(self) -> dict:
        return {
            "run_limit_bytes": RUN_LIMIT_BYTES,
            "total_limit_bytes": TOTAL_LIMIT_BYTES,
            "total_bytes": self.total_bytes,
            "runs": [asdict(r) for r in self.runs],
            "harness": [asdict(h) for h in self.harness],
        }

    @classmethod
    def from_dict(cls, data: dict) -> "EntryScan":
        return cls([EmbeddedRun(**r) for r in data.get("runs", [])], int(data.get("total_bytes", 0)),
                   [HarnessReach(**h) for h in data.get("harness", [])])


def _class_changes(text: str) -> int:
    kinds = ["u" if ch.isupper() else "l" if ch.islower() else "d" if ch.isdigit() else "o" for ch in text]
    return sum(a != b for a, b in zip(kinds, kinds[1:]))


def _token(kind: str, text: str, continuing: bool = False) -> tuple[str, float] | None:
    """(kind, decoded bytes) of one token; None when it is not data (a plain identifier).
    ``continuing``: the line before was base64, so any such word continues the run
    (a short random chunk may lack a letter case or digits, or look like an identifier)."""
    if kind == "esc":
        units = _ESCAPE.findall(text)
        return "escaped bytes", len(units) + len(text) - sum(map(len, units))
    if kind == "hexnum":
        return "hex", (len(text) - 2) / 2
    if kind == "num":
        digits = sum(ch.isdigit() for ch in text)
        return "numbers", digits * _DIGIT_BYTES
    if kind == "wide":
        return "non-ASCII", sum(2 if ord(ch) > 0x7FF else 1 for ch in text)
    body = text.rstrip("=")
    if _HEX.fullmatch(body):
        if body.isdigit():
            return "numbers", len(body) * _DIGIT_BYTES
        return "hex", len(body) / 2
    if _BASE32.fullmatch(text) and any(ch.isdigit() for ch in body):
        return "base32", len(body) * 5 / 8
    upper, lower = any(ch.isupper() for ch in body), any(ch.islower() for ch in body)
    digit = any(ch.isdigit() for ch in body)
    # Random base64 changes character class at about 2 characters in 3; an identifier such
    # as cudaMemcpy2DToArrayAsync at most every other word.
    if continuing or upper and lower and digit and (len(body) >= 64 or _class_changes(body) >= 0.4 * (len(body) - 1)):
        return "base64", len(body) * 3 / 4
    return None


def _line(text: str, run: list[str] | None = None) -> tuple[float, set[str]]:
    """Decoded bytes and token kinds of one line, when it is a data line; (0, ∅) otherwise.
    ``run``: the kinds of the run the line before belongs to, if any; then a short line (a
    row's last number) continues it, and in a base64 run so does a line that is one chunk
    of it (at least RELAXED_COVER of the line) even when that chunk lacks a digit."""
    visible = len(text) - sum(ch.isspace() for ch in text)
    if not visible:
        return 0.0, set()
    tries = [(False, LINE_MIN_COVER)] + ([(True, RELAXED_COVER)] if run and "base64" in run else [])
    for relaxed, cover in tries:
        payload, covered, kinds = 0.0, 0, set()
        for match in _TOKEN.finditer(text):
            assert match.lastgroup is not None  # every alternative of _TOKEN is a named group
            found = _token(match.lastgroup, match.group(), relaxed)
            if found:
                kinds.add(found[0])
                payload += found[1]
                covered += len(match.group())
        if payload >= (1 if run is not None else LINE_MIN_BYTES) and covered >= cover * visible:
            return payload, kinds
    return 0.0, set()


def scan_text(path: str, text: str) -> tuple[list[EmbeddedRun], float]:
    """Every run of data of one text file (small ones included), and their total in bytes."""
    runs: list[EmbeddedRun] = []
    total = 0.0
    current: EmbeddedRun | None = None  # the run of data lines being extended
    block: list[tuple[int, str]] = []  # (line, visible text) of lines that are not data lines
    block_chars = 0
    block_run: EmbeddedRun | None = None  # the run of incompressible blocks being extended

    def close_block(final: bool) -> None:
        nonlocal block, block_chars, block_run, total
        if block and (block_chars >= BLOCK_CHARS or (final and block_chars >= BLOCK_CHARS // 2)):
            raw = "".join(t for _, t in block).encode()
            packed = len(zlib.compress(raw, 9))
            if packed >= BLOCK_RATIO * len(raw):
                total += packed
                if block_run is None:
                    block_run = EmbeddedRun(path, block[0][0], block[-1][0], 0, 0, ["incompressible text"])
                    runs.append(block_run)
                block_run.last_line = block[-1][0]
                block_run.bytes += packed
                block_run.chars += len(raw)
            else:
                block_run = None
        block, block_chars = [], 0

    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip(_GLUE):
            continue  # blank, or brackets and quotes only: the run goes on
        payload, kinds = _line(line, current.kinds if current is not None else None)
        if not payload:
            current = None
            visible = "".join(line.split())
            block.append((number, visible))
            block_chars += len(visible)
            if block_chars >= BLOCK_CHARS:
                close_block(False)
            continue
        total += payload
        if current is None:
            current = EmbeddedRun(path, number, number, 0, 0, [])
            runs.append(current)
        current.last_line = number
        current.bytes += payload
        current.chars += len(line) + 1
        current.kinds = sorted(set(current.kinds) | kinds)
    close_block(True)
    for run in runs:
        run.bytes = int(run.bytes)
    runs.sort(key=lambda r: r.line)
    return runs, total


def harness_reaches(path: str, text: str) -> list[HarnessReach]:
    found = []
    for pattern, what in _HARNESS:
        for match in pattern.finditer(text):
            number = text.count("\n", 0, match.start()) + 1
            line = text.splitlines()[number - 1] if text else ""
            found.append(HarnessReach(path, number, what, line.strip()[:120]))
    return sorted(found, key=lambda h: (h.path, h.line))


def _decode(raw: bytes) -> str | None:
    if b"\0" in raw:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def scan_entry(entry_dir: Path, files: list[Path]) -> EntryScan:
    """Scan every file of the entry folder (``runner.entry_build.context.entry_files``).
    Once the data lines found carry over ``SCAN_STOP_BYTES`` (the finding is certain), the
    other files are read for reaches into the harness only (20,000 small files of data
    stop after the first few hundred)."""
    scan = EntryScan()
    total = 0.0
    prefix = str(entry_dir).rstrip("/") + "/"
    for path in files:
        name = str(path)  # as a string: Path.relative_to costs more than scanning a small file
        rel = name[len(prefix):] if name.startswith(prefix) else path.relative_to(entry_dir).as_posix()
        raw = safe_read.read_bytes(path, "text")  # a regular file of at most 16 MiB, never a FIFO
        text = _decode(raw)
        if total > SCAN_STOP_BYTES:
            scan.harness += harness_reaches(rel, text) if text is not None else []
            continue
        if text is None:  # not text: all of it is data (the audit names its kind too)
            run = EmbeddedRun(rel, 0, 0, len(raw), len(raw), ["binary file"])
            total += len(raw)
            if run.bytes >= LIST_MIN_BYTES:
                scan.runs.append(run)
            continue
        runs, file_total = scan_text(rel, text)
        total += file_total
        scan.runs += [r for r in runs if r.bytes >= LIST_MIN_BYTES]
        scan.harness += harness_reaches(rel, text)
    scan.total_bytes = int(total)
    return scan
