"""The information an entry carries (threat-model class 4), whatever its encoding.

``entry_scan`` finds the encodings it knows (base64, hex, numbers, escapes...). An author
who wants a network in the image can pick one it does not know: each nibble written as one
of 16 English words makes 226 KB of text that the scan reads as prose. What no encoding
escapes is its *size once compressed*: a network of N bits cannot be written in fewer than
about N bits, whatever the alphabet. So the runner measures, for every file of the entry
folder whatever its suffix (code, comments, docstrings, literals, text, data), for every
file a build step added to the image that neither the base image, nor a locked wheel, nor
the entry's source accounts for, and for every file a locked wheel installs unless that
wheel is on the reviewed allow-list, the compressed size: the smallest of zlib (level 9), xz
(preset 9 | extreme) and zstd (level 22), so that an author cannot choose the encoding one
compressor handles badly. The entry's lock counts only what is not a pin's hash (comments,
names, versions, markers): each hash must be the digest of a wheel the runner resolved, so
it carries nothing the author chose.

A lock may pin any published package, and an author can publish one holding a trained
network (three small networks at 3 bits are some 25 KB of Python): exempt as "a locked
wheel's", it left the entry's report at its own few KB. So a wheel's files are exempt only
when the wheel is on ``wheel_allowlist.toml`` (``wheel_allowlist``), by name, version and
sha256 together: the frameworks and their dependencies the honest entries lock, each with
why it is there, reviewed like code. Every other locked wheel's files (its members: code,
data, metadata and ``RECORD``) count, each compressed on its own (``measure_wheel``), as
origin "wheel"; the report names each such wheel with its bytes and its share of the budget
(``counted_wheels``), in ``image-audit.json``, ``result.json``, a finding over the budget
and ``runner verify``. The image pass leaves the installed copies of every locked wheel's
files aside (they are the wheel's, by its ``RECORD``), so a counted wheel counts once.

The default budget, ``DEFAULT_BUDGET_BYTES``, comes from the project's honest entries
(``python -m runner.entry_build.information entries/* tests/entries/*`` prints each folder's part):
the entry folders carry 4.5 to 13.1 KB (each file compressed on its own, summed: mnist-cnn-cpu
6.0, the Fashion-MNIST twins 4.5-5.3, resnet9-v100 8.4, resnet50-imagenet 9.8, drqa-squad
13.1 with its two models and its smoke lock; the honest test entries 3.9-4.7), and the
files their build steps add 5.2 KB more (mnist-cnn-cpu's image: the user ``useradd`` writes
into ``/etc``, the venv's activate and console scripts, ``pyvenv.cfg``), so about 18 KB at
most. The budget is 32 KiB: room for a recipe nearly twice the largest honest one, and still
well under the smallest plain-words network seen (45.7 KB: a 33k-parameter CNN at 8 bits,
one word a nibble). Every wheel the honest entries lock is on the allow-list, so
their figures are the same with the wheels counted. What fits under it: about 87k parameters at 3 bits, 33k at 8 bits. A
network that small (the issue's 12.7k-parameter CNN at 3 bits in 7.5 KiB) is left to the
other class 4 checks (evidence of training, cross-seed weights); the reviewer sees this
report, file by file with the largest literal, in every bundle (``runner verify``).

A task may declare its own budget (``Task.information_budget``, recorded in the result).
Over the budget the run is non-conforming, naming the largest contributors.

An entry folder is untrusted input, so the measure knows each file by its size before it
reads it (``runner.safe_read``: a regular file, never a FIFO) and stops once the entry is over
every budget (``STOP_BYTES``): a file over ``COMPRESS_MAX_BYTES`` counts whole, unread (the
entry folder refuses it anyway); one over ``WHOLE_MAX_BYTES`` is streamed through the three
compressors and left as soon as each has written more than ``STOP_BYTES`` (a 16 MB text: under
a second, not three minutes); once the files measured carry more than ``STOP_BYTES``, the
others are listed unmeasured (20,000 small files: about a second, not a hundred). Every file
of an honest entry is small and measured exactly as before. ``runner bench readers`` prints
the figures.
"""

from __future__ import annotations

import ast
import io
import lzma
import os
import re
import sys
import threading
import tokenize
import zipfile
import zlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

import zstandard

from runner import safe_read
from runner.entry_build.context import entry_files
from runner.entry_build.lockfile import parse_lock
from runner.entry_build.wheel_allowlist import Allowlist, load_allowlist, wheel_id
from runner.entry_build.wheelhouse import wheel_path
from runner.errors import UserError
from runner.tasks import get_task

# Nearly twice the largest honest entry with its image's share (about 18 KB): see above.
DEFAULT_BUDGET_BYTES = 32 * 1024
# The largest contributors a finding and result.json name.
TOP = 5
# Files over this size are counted whole, by their apparent size and without a byte read
# (they are far over any budget anyway; an entry folder refuses them outright, see
# ``runner.manifest.entry_folder``).
COMPRESS_MAX_BYTES = 16 << 20
# A file's information is measured up to this many bytes compressed, and the entry's files up
# to this many in all: past it the entry is over every budget a task sets (32 KiB in every
# task's rules), so the exact figure no longer matters. A file stops being read as soon as
# each of the three compressors has written more than this (a 16 MB text stops after its
# first few hundred KB); once the files measured carry more than this in all, the others are
# listed, not compressed (20,000 small files stop after the first few thousand).
STOP_BYTES = 64 << 10
# Files up to this size are read whole and compressed in one call each (every file of an
# honest entry); larger ones are streamed through the compressors in chunks of STREAM_CHUNK.
WHOLE_MAX_BYTES = 1 << 20
STREAM_CHUNK = 256 << 10
_HASH_OPTION = re.compile(r"--hash[=\s]sha256:[0-9a-fA-F]{64}")
# zstd -22 at one setting for every call (its parameters follow each input's size, so the
# output is the same as a fresh compressor's; making one per file cost more than compressing).
# One per thread: a compressor (and every compressobj it made) holds one native context, and
# two threads compressing through it at once crash the process (the inspection's read-ahead
# measures wheels beside another run's inspection in one process).
_PER_THREAD = threading.local()


def _zstd() -> zstandard.ZstdCompressor:
    compressor = getattr(_PER_THREAD, "zstd", None)
    if compressor is None:
        compressor = _PER_THREAD.zstd = zstandard.ZstdCompressor(level=22, write_content_size=False,
                                                                 write_checksum=False)
    return compressor


def _xz_filters(size: int) -> list[dict]:
    # xz -9e's 64 MiB dictionary, cut to the file's size: the same output, without
    # allocating (and clearing) 674 MiB for a file of a few KiB
    return [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME, "dict_size": max(4096, min(size, 64 << 20))}]


def compressed_size(data: bytes) -> int:
    """The smallest of zlib -9, xz -9e and zstd -22 (raw streams: no container header
    beyond the compressor's own); a file over ``COMPRESS_MAX_BYTES`` counts whole."""
    if not data:
        return 0
    if len(data) > COMPRESS_MAX_BYTES:
        return len(data)
    return min(len(zlib.compress(data, 9)),
               len(lzma.compress(data, format=lzma.FORMAT_RAW, filters=_xz_filters(len(data)))),
               len(_zstd().compress(data)))


class _Compressor(Protocol):
    """zlib's, lzma's and zstandard's streaming compressors, as ``streamed_size`` feeds them."""

    def compress(self, data: bytes, /) -> bytes: ...

    def flush(self) -> bytes: ...


def streamed_size(chunks: Iterable[bytes], size: int, stop_at: int = STOP_BYTES) -> tuple[int, bool]:
    """``(compressed_size, stopped)`` of ``size`` bytes given in ``chunks``, fed to the three
    compressors as they come; each compressor is dropped once it has written more than
    ``stop_at`` bytes, and reading stops when all three have. ``stopped``: the figure is then
    a lower bound over ``stop_at`` (the smallest any compressor had written), not the exact
    size. A file that is read to its end gives the same figure as ``compressed_size``."""
    if size > COMPRESS_MAX_BYTES:
        return size, True
    running: dict[str, _Compressor] = {
        "zlib": zlib.compressobj(9),
        "xz": lzma.LZMACompressor(format=lzma.FORMAT_RAW, filters=_xz_filters(size)),
        "zstd": _zstd().compressobj(size=size),
    }
    written = dict.fromkeys(running, 0)
    seen = 0
    for chunk in chunks:
        seen += len(chunk)
        for name, compressor in list(running.items()):
            written[name] += len(compressor.compress(chunk))
            if written[name] > stop_at:
                del running[name]
        if not running:
            return min(written.values()), True
    if seen == 0:
        return 0, False
    for name, compressor in list(running.items()):
        try:
            written[name] += len(compressor.flush())
        except zstandard.ZstdError:  # the file was shorter than its size said (it shrank): left out
            del written[name]
    return min(written.values()), False


def budget_for(task_id: str) -> tuple[int, str]:
    """The information budget of an entry of ``task_id``, and where it comes from."""
    declared = get_task(task_id).information_budget
    return (declared, f"task {task_id}") if declared else (DEFAULT_BUDGET_BYTES, "default")


def lock_free_text(text: str) -> str:
    """A hash-pinned lock without its hashes: what its author chose (comments, names,
    versions, markers). The hashes are checked against the wheels the runner resolves."""
    return _HASH_OPTION.sub("", text)


@dataclass
class FileInformation:
    path: str  # in the entry folder, the image's absolute path, or a member of a wheel
    origin: str  # "entry", "image" or "wheel"
    bytes: int  # its size
    compressed: int  # its information: the smallest compressed size
    counted: str = "whole"  # or "without the pins' hashes" (the run's lock)
    wheel: str | None = None  # a wheel's member: the wheel, "name==version"

    @property
    def where(self) -> str:
        return f"{self.path} (in {self.wheel})" if self.wheel else self.path


@dataclass
class LockedWheel:
    """A wheel of the run's lock, and whether the reviewed allow-list exempts its files."""

    wheel: str  # "name==version"
    sha256: str
    reviewed: bool  # on the allow-list (name, version and digest): its files do not count


@dataclass
class LargestLiteral:
    """The largest single string literal, comment block, docstring or text paragraph."""

    path: str
    line: int
    last_line: int
    kind: str  # "docstring", "string literal", "comment", "paragraph", "binary file"
    chars: int
    compressed: int

    @property
    def where(self) -> str:
        lines = f"line {self.line}" + (f"-{self.last_line}" if self.last_line != self.line else "")
        return f"{self.path} {lines}"


@dataclass
class InformationReport:
    files: list[FileInformation] = field(default_factory=list)
    largest_literal: LargestLiteral | None = None
    budget: int = DEFAULT_BUDGET_BYTES
    budget_from: str = "default"  # "default", or "task <id>" when the task declares its own
    lock: str | None = None  # the entry's lock, counted without its hashes
    wheels: list[LockedWheel] = field(default_factory=list)  # the lock's wheels, reviewed or counted

    @property
    def total(self) -> int:
        return sum(f.compressed for f in self.files)

    def part(self, origin: str) -> int:
        return sum(f.compressed for f in self.files if f.origin == origin)

    @property
    def over(self) -> bool:
        return self.total > self.budget

    def top(self, n: int = TOP) -> list[FileInformation]:
        return sorted(self.files, key=lambda f: (-f.compressed, f.path))[:n]

    def counted_wheels(self) -> list[dict]:
        """Each wheel off the allow-list, largest first: its files, bytes, information and
        share of the budget (a fraction)."""
        rows = []
        for locked in self.wheels:
            if locked.reviewed:
                continue
            files = [f for f in self.files if f.origin == "wheel" and f.wheel == locked.wheel]
            compressed = sum(f.compressed for f in files)
            rows.append({"wheel": locked.wheel, "sha256": locked.sha256, "files": len(files),
                         "bytes": sum(f.bytes for f in files), "compressed": compressed,
                         "share": round(compressed / self.budget, 4) if self.budget else None})
        return sorted(rows, key=lambda r: (-r["compressed"], r["wheel"]))

    def describe_wheels(self) -> str:
        """The wheels off the allow-list with their information and share, for a reader."""
        counted = self.counted_wheels()
        reviewed = sum(1 for w in self.wheels if w.reviewed)
        if not counted:
            return f"every locked wheel on the reviewed allow-list ({reviewed})" if self.wheels else "no locked wheel"
        named = ", ".join(f"{w['wheel']} {w['compressed']} bytes in {w['files']} files "
                          f"({100 * w['compressed'] / self.budget:.0f} % of the budget)" for w in counted)
        return f"wheels off the reviewed allow-list: {named} ({reviewed} reviewed wheels exempt)"

    def problem(self) -> str | None:
        """The finding (without the class prefix) when over the budget; None otherwise."""
        if not self.over:
            return None
        named = ", ".join(f"{f.where} ({f.compressed} bytes)" for f in self.top())
        literal = self.largest_literal
        largest = (f"; its largest literal is {literal.where} ({literal.kind}, {literal.compressed} bytes compressed)"
                   if literal else "")
        wheels = f"; {self.describe_wheels()}" if self.counted_wheels() else ""
        return (f"the entry carries {self.total} bytes of information (compressed), over its information "
                f"budget of {self.budget} bytes ({self.budget_from}): {named}{largest}{wheels}")

    def to_dict(self) -> dict:
        return {
            "budget": self.budget, "budget_from": self.budget_from, "total": self.total,
            "entry_total": self.part("entry"), "image_total": self.part("image"),
            "wheel_total": self.part("wheel"), "lock": self.lock,
            "files": [asdict(f) for f in self.files],
            "largest_literal": asdict(self.largest_literal) if self.largest_literal else None,
            "wheels": [asdict(w) for w in self.wheels],
            "counted_wheels": self.counted_wheels(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "InformationReport":
        literal = data.get("largest_literal")
        return cls([FileInformation(**f) for f in data.get("files", [])],
                   LargestLiteral(**literal) if literal else None,
                   int(data.get("budget", DEFAULT_BUDGET_BYTES)), str(data.get("budget_from", "default")),
                   data.get("lock"), [LockedWheel(**w) for w in data.get("wheels") or []])

    def summary(self) -> dict:
        """For result.json: the totals, the budget, the largest contributors and each
        locked wheel off the allow-list with its share."""
        return {
            "total": self.total, "entry_total": self.part("entry"), "image_total": self.part("image"),
            "wheel_total": self.part("wheel"),
            "budget": self.budget, "budget_from": self.budget_from, "files": len(self.files),
            "top": [asdict(f) for f in self.top()],
            "largest_literal": asdict(self.largest_literal) if self.largest_literal else None,
            "counted_wheels": self.counted_wheels(),
            "reviewed_wheels": sum(1 for w in self.wheels if w.reviewed),
        }


def _python_literals(text: str) -> list[tuple[int, int, str, str]]:
    """(first line, last line, kind, text) of every string literal (adjacent ones joined, as
    Python joins them), docstring and comment block (consecutive comment lines) of a source."""
    found: list[tuple[int, int, str, str]] = []
    docstrings = set()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docstrings.add(body[0].lineno)
    current: list = []  # [first, last, kind, parts, last token type]
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        kind = {tokenize.STRING: "string literal", tokenize.COMMENT: "comment"}.get(tok.type)
        if kind is None:
            if tok.type in (tokenize.NL, tokenize.NEWLINE) and current and current[2] == "comment":
                continue  # a comment block goes on over its line ends
            if tok.type == tokenize.NL and current:
                continue  # implicit concatenation over lines
            if current:
                found.append((current[0], current[1], current[2], "".join(current[3])))
                current = []
            continue
        if kind == "string literal" and tok.start[0] in docstrings and not current:
            kind = "docstring"
        if current and (current[2] == kind or {current[2], kind} == {"docstring", "string literal"}):
            current[1] = tok.end[0]
            current[3].append(tok.string)
        else:
            if current:
                found.append((current[0], current[1], current[2], "".join(current[3])))
            current = [tok.start[0], tok.end[0], kind, [tok.string]]
    if current:
        found.append((current[0], current[1], current[2], "".join(current[3])))
    return found


def _paragraphs(text: str) -> list[tuple[int, int, str, str]]:
    """(first line, last line, "paragraph", text) of each run of non-blank lines."""
    found, start, lines = [], 0, []
    for number, line in enumerate(text.splitlines() + [""], start=1):
        if line.strip():
            start = start or number
            lines.append(line)
        elif lines:
            found.append((start, number - 1, "paragraph", "\n".join(lines)))
            start, lines = 0, []
    return found


def _upper_bound(n: int) -> int:
    """More than any of the three compressors writes for ``n`` bytes (zlib never writes more
    than its stored blocks: 5 bytes a block of at most 16 KiB, 6 of header and checksum)."""
    return n + 16 + 5 * (n // 16000 + 1)


def largest_literal(path: str, raw: bytes, beat: int = -1, whole: int | None = None) -> LargestLiteral | None:
    """The file's largest literal, comment block or docstring (Python, read with ``tokenize``;
    a source that does not parse, and other text, by paragraph), by compressed size; a file
    that is not text is one literal. Pieces that could not carry more than ``beat`` bytes
    compressed (the largest literal found so far in other files) are not compressed: they
    could not be the largest. ``whole``: the file's own compressed size, when known."""
    try:
        text = raw.decode("utf-8") if b"\0" not in raw else None
    except UnicodeDecodeError:
        text = None
    if text is None:
        return LargestLiteral(path, 0, 0, "binary file", len(raw), compressed_size(raw) if whole is None else whole)
    pieces = None
    if path.endswith(".py"):
        try:
            pieces = _python_literals(text)
        except (SyntaxError, tokenize.TokenError, ValueError, RecursionError, MemoryError):
            pieces = None
    if pieces is None:
        pieces = _paragraphs(text)
    # the longest few by characters are the only candidates worth compressing
    best = None
    for first, last, kind, body in sorted(pieces, key=lambda p: -len(p[3]))[:8]:
        encoded = body.encode()
        if _upper_bound(len(encoded)) <= max(beat, best.compressed if best else -1):
            continue
        size = compressed_size(encoded)
        if best is None or size > best.compressed:
            best = LargestLiteral(path, first, last, kind, len(body), size)
    return best


def measure_entry(entry_dir: Path, files: list[Path], lock: Path | None = None,
                  stop_at: int = STOP_BYTES) -> InformationReport:
    """Every file of the entry folder, and its largest literal; ``lock`` (the run's lock,
    inside the folder) counts without its hashes. Each file is known by its size before it
    is read: one over ``COMPRESS_MAX_BYTES`` counts whole, unread; one over
    ``WHOLE_MAX_BYTES`` is streamed and stops at ``stop_at`` bytes compressed (and is its own
    largest literal); once the files measured carry more than ``stop_at`` in all, the rest
    are listed unmeasured (0 bytes: the entry is over every budget already)."""
    report = InformationReport(lock=lock.relative_to(entry_dir).as_posix()
                               if lock is not None and lock.is_relative_to(entry_dir) else None)
    total = 0  # of the files measured so far
    unmeasured = f"not measured: the files before it carry over {stop_at} bytes already"
    prefix = str(entry_dir).rstrip("/") + "/"
    for path in files:
        total += report.files[-1].compressed if report.files else 0
        name = str(path)  # as a string: Path.relative_to costs more than measuring a small file
        rel = name[len(prefix):] if name.startswith(prefix) else path.relative_to(entry_dir).as_posix()
        if total > stop_at:
            size = os.lstat(path).st_size  # a regular file: entry_files refused anything else
            report.files.append(FileInformation(rel, "entry", size, 0, unmeasured))
            continue
        size = safe_read.size_of(path)
        if size > WHOLE_MAX_BYTES:
            compressed, stopped = ((size, True) if size > COMPRESS_MAX_BYTES
                                   else streamed_size(safe_read.iter_chunks(path, "text", chunk=STREAM_CHUNK), size, stop_at))
            counted = ("whole, uncompressed (too large)" if size > COMPRESS_MAX_BYTES else
                       f"until over {stop_at} bytes compressed (a lower bound)" if stopped else "whole")
            report.files.append(FileInformation(rel, "entry", size, compressed, counted))
            literal: LargestLiteral | None = LargestLiteral(rel, 0, 0, "whole file (too large to read by literal)",
                                                            size, compressed)
        else:
            raw = safe_read.read_bytes(path, "text")
            if rel == report.lock:
                free = lock_free_text(raw.decode("utf-8", "replace")).encode()
                report.files.append(FileInformation(rel, "entry", len(raw), compressed_size(free),
                                                    "without the pins' hashes"))
                continue
            compressed = compressed_size(raw)
            report.files.append(FileInformation(rel, "entry", len(raw), compressed))
            beat = report.largest_literal.compressed if report.largest_literal else -1
            # no piece of a file smaller than the largest literal so far can be larger: not parsed
            literal = largest_literal(rel, raw, beat, compressed) if _upper_bound(len(raw)) > beat else None
        if literal and (report.largest_literal is None or literal.compressed > report.largest_literal.compressed):
            report.largest_literal = literal
    return report


def measure_wheel(wheel: Path, label: str) -> list[FileInformation]:
    """Every file a wheel installs (its members: the package, its ``.data`` files, its
    metadata and ``RECORD``, whose names are information too), each compressed on its own."""
    found = []
    with zipfile.ZipFile(wheel) as z:
        for info in sorted(z.infolist(), key=lambda i: i.filename):
            if info.is_dir():
                continue
            if info.file_size > COMPRESS_MAX_BYTES:
                found.append(FileInformation(info.filename, "wheel", info.file_size, info.file_size,
                                             "whole, uncompressed (too large)", label))
                continue
            found.append(FileInformation(info.filename, "wheel", info.file_size,
                                         compressed_size(z.read(info)), wheel=label))
    return found


def locked_wheels(wheels: list[Path], allowlist: Allowlist | None = None,
                  measure=measure_wheel) -> tuple[list[LockedWheel], list[FileInformation]]:
    """The lock's wheels, each reviewed or not, and the files of those off the allow-list
    (``measure``: how a wheel's files are measured, ``measure_wheel`` or a kept answer)."""
    allowlist = allowlist if allowlist is not None else load_allowlist()
    locked, files = [], []
    for wheel in wheels:
        found = wheel_id(wheel)
        reviewed = allowlist.allows(found)
        locked.append(LockedWheel(found.label, found.sha256, reviewed))
        if not reviewed:
            files += measure(wheel, found.label)
    return locked, files


def _lock_wheels(lock: Path, allowlist: Allowlist) -> tuple[list[LockedWheel], list[FileInformation], list[str]]:
    """``locked_wheels`` of a lock's pins from the host's wheelhouse, without downloading:
    a reviewed pin needs no file; the pins off the list whose wheel is not there are named."""
    locked, files, missing = [], [], []
    for pin in parse_lock(lock):
        allowed = [h for h in pin.hashes if allowlist.holds(pin.name, pin.version, h)]
        if allowed:
            locked.append(LockedWheel(f"{pin.key}=={pin.version}", allowed[0], True))
            continue
        stored = next((p for p in (wheel_path(h) for h in pin.hashes) if p is not None), None)
        if stored is None:
            missing.append(f"{pin.key}=={pin.version}")
            continue
        found = wheel_id(stored)
        locked.append(LockedWheel(found.label, found.sha256, allowlist.allows(found)))
        files += [] if locked[-1].reviewed else measure_wheel(stored, found.label)
    return locked, files, missing


def _folder_line(folder: Path, allowlist: Allowlist) -> str | None:
    """The line ``_main`` prints for ``folder`` (None: not an entry folder, left out)."""
    manifest = folder / "entry.yaml"
    if not manifest.exists() and not manifest.is_symlink():
        return None
    safe_read.size_of(manifest)  # a regular file (a FIFO, a link or a folder is named and refused)
    lock = folder / "requirements.lock"
    report = measure_entry(folder, entry_files(folder), lock)
    entry_total = report.total
    missing: list[str] = []
    if lock.is_file():
        try:
            report.wheels, wheel_files, missing = _lock_wheels(lock, allowlist)
        except UserError as e:
            return f"{folder}: its lock cannot be read: {e}"
        report.files += wheel_files
    literal = report.largest_literal
    absent = f"; not in the wheelhouse, not measured: {', '.join(missing)}" if missing else ""
    over = f"; OVER the default budget of {DEFAULT_BUDGET_BYTES} bytes" if report.total > DEFAULT_BUDGET_BYTES else ""
    return (f"{folder}: {report.total} bytes ({report.total / 1024:.1f} KiB) in {len(report.files)} files "
            f"(entry folder {entry_total}, wheels {report.part('wheel')}); "
            f"largest literal {literal.where if literal else '-'} "
            f"({literal.compressed if literal else 0} bytes); {report.describe_wheels()}{absent}{over}")


def _main(argv: list[str]) -> int:
    """Print each entry folder's information: ``python -m runner.entry_build.information FOLDER...``:
    its files, and the files of its lock's wheels off the allow-list (those in the host's
    wheelhouse; the image's own share needs the build). A folder that cannot be read (a FIFO
    or an unreadable file in it; a FIFO, device or missing name given as the folder) is one
    line on stderr, and the exit status is 2; regular files and folders without an
    ``entry.yaml`` are left out."""
    allowlist = load_allowlist()
    status = 0
    for name in argv:
        folder = Path(name)
        try:
            if folder.is_file() and not folder.is_symlink():
                continue  # a glob's other files (``tests/entries/*``): no entry folder, left out as ever
            if not folder.is_dir():
                kind = f"a {safe_read.kind_of(os.lstat(folder).st_mode)}" if os.path.lexists(folder) else "nothing there"
                raise UserError(f"{safe_read.visible(name)} is not an entry folder (it is {kind})",
                                "name entry folders (each with an entry.yaml)")
            line = _folder_line(folder, allowlist)
        except UserError as e:
            print(f"information: error: {e}", file=sys.stderr)
            status = 2
            continue
        except OSError as e:
            print(f"information: error: {safe_read.visible(str(e.filename or name))} cannot be read "
                  f"({e.strerror or e})", file=sys.stderr)
            status = 2
            continue
        if line is not None:
            print(line)
    return status


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
