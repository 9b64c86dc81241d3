"""The image inspection: what an entry brings beyond its declared sources (threat-model class 4).

(Named apart from ``runner audit``, the auditor's command over a bundle. The file it writes,
``image-audit.json``, the result's ``image_audit`` section and its cache keep the names they
had when results were first written, so earlier results still read.)

After a build the runner lists, from the engine's own export of the image (never from a
program inside it), every regular file that comes neither from the base image, nor from
a wheel of the lock (as that wheel's RECORD lists it), nor from the entry's source files;
plus every non-code file of the entry folder; plus the data files the lock's wheels
carry outside their test folders. Model weights, data blobs or copies of the evaluation
inputs among them make a result non-conforming, with the file named.

Two content checks go with it: every byte of the image and of the lock's wheels is searched
for the evaluation set itself, by item and by label sequence (``eval_copies``), and the
entry's own files for embedded data and for code that reaches into the runner's harness
(``entry_scan``).

No folder is exempt: a ``.pyc`` is accounted for only as the compilation of a source in the
image (``bytecode``: its PEP 552 header against the source, its size against a bound), and
pip's own files in the venv by the RECORD of the wheel the base image carries for it
(``/usr/share/python-wheels``). In the same pass the information of every file a build step
added (neither the base's, nor a wheel's, nor the entry's, nor a copy of one of them) is
measured for the information budget (``information``): its bytes are compressed as they go
by, so memory stays bounded by the largest file. An installed ``RECORD`` counts only its rows
a wheel does not declare. The locked wheels' own files count from the wheels themselves,
but for those on the reviewed allow-list (``wheel_allowlist``); the answer is kept per image,
evaluation set and allow-list.
"""

from __future__ import annotations

import base64
import csv
import functools
import hashlib
import io
import json
import os
import re
import tarfile
import threading
import zipfile
from contextlib import ExitStack
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from runner import image_cache
from runner.entry_build import bytecode, layers
from runner.entry_build.entry_scan import EntryScan, scan_entry
from runner.entry_build.information import (
    FileInformation,
    InformationReport,
    compressed_size,
    locked_wheels,
    measure_entry,
    measure_wheel,
)
from runner.entry_build.wheel_allowlist import load_allowlist
from runner.entry_build.eval_copies import ITEMS_MIN, LABEL_RUN_MIN, UNPACK_BYTES, WHOLE_BYTES, Copy, EvalIndex
from runner.digests import sha256_file
from runner.engine.interface import Engine
from runner.report import reporter

# 5: the files of the locked wheels off the allow-list count; 4: the information budget and
# the .pyc rule; 3: the content search and the entry scan
AUDIT_FORMAT = 5
INSPECTION_FILE = "image-audit.json"
# Weights and data formats, by name...
DATA_SUFFIXES = {
    ".pt", ".pth", ".ckpt", ".npy", ".npz", ".safetensors", ".onnx", ".h5", ".hdf5", ".pb", ".pkl",
    ".pickle", ".joblib", ".params", ".bin", ".tflite", ".idx", ".ubyte", ".gz", ".xz", ".bz2",
    ".zip", ".tar", ".csv", ".tsv", ".parquet", ".arrow", ".feather", ".mat", ".dat", ".keras",
}
# ...and by their first bytes, whatever the name.
DATA_MAGIC = (b"\x93NUMPY", b"PK\x03\x04", b"\x89HDF", b"\x1f\x8b", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
CODE_SUFFIXES = {".py", ".sh", ".md", ".txt", ".yaml", ".yml", ".toml", ".cfg", ".ini", ".lock", ".in", ".json", ""}
# A file of unknown kind this large, neither code nor a program, is a blob.
BLOB_BYTES = 256 * 1024
# A data file in a wheel this large, outside the package's tests, is suspect.
WHEEL_DATA_BYTES = 1 << 20
TEST_DIRS = re.compile(r"(^|/)(tests?|testing)(/|$)")
SITE_PACKAGES = re.compile(r"^opt/venv/lib/python3\.\d+/site-packages/(.+)$")
INSTALLED_RECORD = re.compile(r"^([^/]+\.dist-info)/RECORD$")
# What pip writes into an installed dist-info folder without a hash in its RECORD.
PIP_BOOKKEEPING = {"RECORD", "INSTALLER", "REQUESTED", "direct_url.json"}
HEAD_BYTES = 32  # a .pyc's 16-byte header and the first bytes of what follows it


@dataclass
class AuditedFile:
    path: str
    size: int
    origin: str  # "image", "entry" or "wheel:<file>"
    suspect: str | None = None  # why it looks like weights or data; None when it doesn't


def _copy_dict(copy: Copy) -> dict:
    return {k: v for k, v in asdict(copy).items() if k != "ids"}


@dataclass
class ImageInspection:
    unexplained: list[AuditedFile] = field(default_factory=list)
    entry_data_files: list[AuditedFile] = field(default_factory=list)
    wheel_data_files: list[AuditedFile] = field(default_factory=list)
    # Files of the image or members of a locked wheel holding evaluation items or labels,
    # and how many distinct items / the longest label run in all of them together.
    eval_copies: list[Copy] = field(default_factory=list)
    eval_items: int = 0
    eval_label_run: int = 0
    entry_scan: EntryScan = field(default_factory=EntryScan)
    # Files that pack more than the content search unpacks (so it could not read them all).
    left_packed: list[str] = field(default_factory=list)
    information: InformationReport = field(default_factory=InformationReport)

    @property
    def findings(self) -> list[AuditedFile]:
        return [f for f in self.unexplained + self.entry_data_files + self.wheel_data_files if f.suspect]

    @property
    def carries_eval_set(self) -> bool:
        return self.eval_items >= ITEMS_MIN or self.eval_label_run >= LABEL_RUN_MIN

    def problem(self) -> str | None:
        """The non-conforming reason, naming the files; None when nothing is suspect."""
        parts = []
        found = self.findings
        if found:
            named = ", ".join(f"{f.path} ({f.size} bytes, {f.origin}: {f.suspect})" for f in found[:5])
            more = f" and {len(found) - 5} more" if len(found) > 5 else ""
            parts.append(f"the image carries weights or data: {named}{more}")
        if self.carries_eval_set:
            copies = sorted(self.eval_copies, key=lambda c: (-c.items, -c.label_run, c.path))
            what = []
            if self.eval_items >= ITEMS_MIN:
                what.append(f"{self.eval_items} evaluation items")
            if self.eval_label_run >= LABEL_RUN_MIN:
                what.append(f"a run of {self.eval_label_run} evaluation labels")
            named = ", ".join(c.describe() for c in copies[:3])
            more = f" and {len(copies) - 3} more files" if len(copies) > 3 else ""
            parts.append(f"the image or its locked wheels carry the evaluation set "
                         f"({' and '.join(what)}): {named}{more}")
        if self.left_packed:
            named = ", ".join(self.left_packed[:3])
            more = f" and {len(self.left_packed) - 3} more" if len(self.left_packed) > 3 else ""
            parts.append(f"the search for the evaluation set could not unpack all of {named}{more} "
                         f"(at most {UNPACK_BYTES >> 20} MiB out of a file of up to {WHOLE_BYTES >> 20} MiB)")
        if entry := self.entry_scan.problem():
            parts.append(entry)
        if budget := self.information.problem():
            parts.append(budget)
        return "class 4 (a model trained before the run): " + "; ".join(parts) if parts else None

    def to_dict(self) -> dict:
        """Everything, for the result folder's image-audit.json."""
        return {
            "format": AUDIT_FORMAT,
            "unexplained": [asdict(f) for f in self.unexplained],
            "entry_data_files": [asdict(f) for f in self.entry_data_files],
            "wheel_data_files": [asdict(f) for f in self.wheel_data_files],
            "eval_copies": [_copy_dict(c) for c in self.eval_copies],
            "eval_items": self.eval_items,
            "eval_label_run": self.eval_label_run,
            "left_packed": self.left_packed,
            "entry_scan": self.entry_scan.to_dict(),
            "information": self.information.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: dict) -> "ImageInspection":
        return cls(
            unexplained=[AuditedFile(**f) for f in data["unexplained"]],
            entry_data_files=[AuditedFile(**f) for f in data["entry_data_files"]],
            wheel_data_files=[AuditedFile(**f) for f in data["wheel_data_files"]],
            eval_copies=[Copy(**c) for c in data.get("eval_copies", [])],
            eval_items=int(data.get("eval_items", 0)),
            eval_label_run=int(data.get("eval_label_run", 0)),
            entry_scan=EntryScan.from_dict(data.get("entry_scan", {})),
            left_packed=list(data.get("left_packed", [])),
            information=InformationReport.from_dict(data.get("information") or {}),
        )

    def summary(self) -> dict:
        """For result.json: the counts and every suspect file."""
        scan = self.entry_scan
        return {
            "unexplained_files": len(self.unexplained),
            "unexplained_bytes": sum(f.size for f in self.unexplained),
            "entry_data_files": len(self.entry_data_files),
            "wheel_data_files": len(self.wheel_data_files),
            "findings": [asdict(f) for f in self.findings],
            "eval_items": self.eval_items,
            "eval_label_run": self.eval_label_run,
            "eval_copies": [_copy_dict(c) for c in self.eval_copies] if self.carries_eval_set else [],
            "left_packed": self.left_packed,
            "embedded_data_bytes": scan.total_bytes,
            "embedded_data": [asdict(r) for r in scan.oversized],
            "harness_reach": [asdict(h) for h in scan.harness],
            "information": self.information.summary(),
            "details": INSPECTION_FILE,
        }


def _is_text(head: bytes) -> bool:
    return b"\0" not in head and not any(head.startswith(m) for m in DATA_MAGIC)


def suspicion(name: str, size: int, head: bytes, eval_digest: str | None = None,
              digest: str | None = None) -> str | None:
    if eval_digest is not None and digest == eval_digest:
        return "a copy of the evaluation inputs"
    suffix = Path(name).suffix.lower()
    if suffix in DATA_SUFFIXES:
        return f"a {suffix} file"
    if any(head.startswith(m) for m in DATA_MAGIC):
        return "weights or data by its first bytes"
    if suffix == ".pyc" and any(head[bytecode.HEADER_BYTES:].startswith(m) for m in DATA_MAGIC):
        return "a .pyc holding weights or data after its header"
    if size >= BLOB_BYTES and not head.startswith(b"\x7fELF") and not _is_text(head):
        return "a large binary file that is not a program"
    if size >= 4 * BLOB_BYTES and suffix in (".py", ".json"):
        return "source too large to be code (answers hidden in a literal?)"
    return None


class _Chunks(io.RawIOBase):
    """A file-like view of the engine's export stream, for tarfile's streaming mode."""

    def __init__(self, chunks):
        self._chunks = iter(chunks)
        self._buffer = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        while not self._buffer:
            try:
                self._buffer = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buffer))
        b[:n], self._buffer = self._buffer[:n], self._buffer[n:]
        return n


# Called with (path, size, mtime, sha256, first bytes, the bytes or None past WHOLE_BYTES).
Visit = Callable[[str, int, int, str, bytes, "bytes | None"], None]


def _file_index(engine: Engine, image_id: str, content: EvalIndex | None = None,
                copies: list[Copy] | None = None, visit: Visit | None = None,
                searched: Searched | None = None) -> dict[str, tuple[int, str, bytes]]:
    """``{path: (size, sha256, first bytes)}`` of every regular file, from the engine's export;
    with ``content``, every file is also searched for the evaluation set in the same pass,
    and what is found goes to ``copies``; ``visit`` sees every file as it goes by. The files
    and bytes read so far are the inspection's progress (it takes tens of seconds)."""
    chunks = engine.image_files(image_id)
    try:
        with reporter().phase("inspect", f"reading image {image_id.removeprefix('sha256:')[:12]}") as phase:
            stream = io.BufferedReader(_Chunks(chunks), buffer_size=1 << 20)
            return index_tar(stream, content, copies, visit, progress=phase.read, searched=searched)
    finally:
        chunks.close()


def index_tar(stream, content: EvalIndex | None = None, copies: list[Copy] | None = None,
              visit: Visit | None = None, progress: Callable[[int], None] | None = None,
              searched: Searched | None = None,
              ) -> dict[str, tuple[int, str, bytes]]:
    """``_file_index`` of an export stream (a tar), read once; ``progress`` is told each
    file's size once it is read."""
    index: dict[str, tuple[int, str, bytes]] = {}
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            if not member.isreg():
                continue
            fh = tar.extractfile(member)
            if fh is None:  # never for a regular file
                continue
            path = member.name.lstrip("./")
            index[path] = index_file(path, member.size, int(member.mtime), fh, content, copies, visit, searched)
            if progress is not None:
                progress(member.size)
    return index


# (path, size, sha256) -> True for a file whose bytes are searched elsewhere: a locked wheel's
# member as its RECORD declares it (``wheel_copies`` searches every member of every locked wheel).
Searched = Callable[[str, int, str], bool]


def index_file(path: str, size: int, mtime: int, fh, content: EvalIndex | None, copies: list[Copy] | None,
               visit: Visit | None, searched: Searched | None = None) -> tuple[int, str, bytes]:
    """One regular file of an export or a layer, read once: its size, sha256 and first bytes;
    searched for the evaluation set with ``content`` (what is found goes to ``copies``), but for
    a file ``searched`` says is a locked wheel's, byte for byte (its wheel is searched)."""
    digest = hashlib.sha256()
    found = None
    if size <= WHOLE_BYTES:
        data = fh.read()
        digest.update(data)
        head = data[:HEAD_BYTES]
        if content is not None and not (searched is not None and searched(path, size, digest.hexdigest())):
            found = content.scan_bytes("/" + path, data)
    else:
        data = None
        head = fh.read(HEAD_BYTES)
        digest.update(head)

        def chunks(first=head, fh=fh, digest=digest):
            yield first
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
                yield chunk

        if content is not None:
            found = content.scan_chunks("/" + path, chunks())
        else:
            for _ in chunks():
                pass
    if found is not None and copies is not None:
        copies.append(found)
    if visit is not None:
        visit(path, size, mtime, digest.hexdigest(), head, data)
    return size, digest.hexdigest(), head


def base_file_index(engine: Engine, base_id: str) -> dict[str, tuple[int, str]]:
    """``{path: (size, sha256)}`` of every regular file of a base image (kept per image id)."""
    return _base_index(engine, base_id)


def _base_index(engine: Engine, base_id: str) -> dict[str, tuple[int, str]]:
    kept = image_cache.load("image-audits", base_id, prefix="base-")
    if kept is not None:
        return {k: tuple(v) for k, v in kept.items()}
    wheels: dict[str, tuple[str, int | None]] = {}
    read = _LayerRead(engine, base_id, None, "", None).run()
    if read is not None:  # its layers' facts serve every image built on it
        merged = layers.merge(read.layers)
        index = {path: (facts.size, facts.sha256) for path, (facts, _) in merged.items()}
        for k, layer in enumerate(read.layers):
            for path, rows in layer.wheel_rows.items():
                if merged.get(path, (None, -1))[1] == k:
                    wheels.update({row: (v[0], v[1]) for row, v in rows.items()})
    else:
        index = {path: (size, digest) for path, (size, digest, _) in
                 _file_index(engine, base_id, visit=_base_wheel_visitor(wheels)).items()}
    image_cache.store("image-audits", base_id, index, prefix="base-")
    image_cache.store("image-audits", base_id, wheels, prefix="base-wheels-")
    return index


def _base_wheel_visitor(found: dict[str, tuple[str, int | None]]) -> Visit:
    """Collects the RECORD rows of every wheel the base image carries (Debian's
    ``/usr/share/python-wheels``: pip, which ``python3 -m venv`` installs from it)."""
    def visit(path: str, size: int, mtime: int, digest: str, head: bytes, data: bytes | None) -> None:
        if path.endswith(".whl") and data is not None:
            try:
                found.update(_record_rows(io.BytesIO(data)))
            except (zipfile.BadZipFile, OSError, ValueError, UnicodeDecodeError):
                pass  # not a wheel after all: its files stay unexplained
    return visit


def _base_wheel_rows(engine: Engine, base_id: str) -> dict[str, tuple[str, int | None]]:
    """``_base_wheel_visitor``'s rows of a base image (kept per image id)."""
    kept = image_cache.load("image-audits", base_id, prefix="base-wheels-")
    if kept is None:
        kept = {}
        _file_index(engine, base_id, visit=_base_wheel_visitor(kept))
        image_cache.store("image-audits", base_id, kept, prefix="base-wheels-")
    return {k: (v[0], v[1]) for k, v in kept.items()}


def _record_rows(wheel) -> dict[str, tuple[str, int | None]]:
    """Paths under site-packages -> (hex sha256, size), as the wheel's RECORD declares them."""
    found: dict[str, tuple[str, int | None]] = {}
    with zipfile.ZipFile(wheel) as z:
        records = [n for n in z.namelist() if n.endswith(".dist-info/RECORD")]
        for name in records:
            for row in csv.reader(io.StringIO(z.read(name).decode())):
                if len(row) >= 2 and row[1].startswith("sha256="):
                    raw = base64.urlsafe_b64decode(row[1][7:] + "=" * (-len(row[1][7:]) % 4))
                    size = int(row[2]) if len(row) > 2 and row[2].isdigit() else None
                    found[row[0]] = (raw.hex(), size)
    return found


def wheel_data_files(wheels: list[Path]) -> list[AuditedFile]:
    """Data files the lock's wheels carry outside their test folders."""
    found = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as z:
            for info in z.infolist():
                if info.file_size < WHEEL_DATA_BYTES or TEST_DIRS.search(info.filename):
                    continue
                with z.open(info) as fh:
                    head = fh.read(16)
                why = suspicion(info.filename, info.file_size, head)
                if why and not head.startswith(b"\x7fELF"):
                    found.append(AuditedFile(info.filename, info.file_size, f"wheel:{wheel.name}", why))
    return found


def eval_totals(copies: list[Copy]) -> tuple[int, int]:
    """Distinct evaluation items in all ``copies`` together (an author may split them over
    many files), and the longest label run."""
    return len({i for c in copies for i in c.ids}), max((c.label_run for c in copies), default=0)


def wheel_copies(wheels: list[Path], content: EvalIndex, variant: str) -> tuple[list[Copy], list[str]]:
    """The evaluation set in the lock's wheels, member by member, and the members left
    packed (kept per wheel digest and evaluation set: a wheel never changes either)."""
    found, left_packed = [], []
    for wheel in wheels:
        digest = sha256_file(wheel)
        kept = image_cache.load("image-audits", digest, prefix="wheel-", suffix=variant)
        if kept is not None and kept.get("format") == AUDIT_FORMAT:
            copies = [Copy(**c) for c in kept.get("copies", [])]
            packed = list(kept.get("left_packed", []))
        else:
            before = len(content.left_packed)
            copies = content.scan_wheel(wheel)
            packed = content.left_packed[before:]
            image_cache.store("image-audits", digest, {"format": AUDIT_FORMAT, "copies": [asdict(c) for c in copies],
                                                       "left_packed": packed}, prefix="wheel-", suffix=variant)
        found += copies
        left_packed += packed
    return found, left_packed


def wheel_information(wheel: Path, label: str) -> list[FileInformation]:
    """``information.measure_wheel``, kept per wheel digest: a wheel never changes."""
    digest = sha256_file(wheel)
    kept = image_cache.load("image-audits", digest, prefix="wheel-information-")
    if kept is not None and kept.get("format") == AUDIT_FORMAT and kept.get("wheel") == label:
        try:
            return [FileInformation(**f) for f in kept["files"]]
        except (KeyError, TypeError):
            pass  # a damaged answer: measure again
    files = measure_wheel(wheel, label)
    image_cache.store("image-audits", digest, {"format": AUDIT_FORMAT, "wheel": label,
                                               "files": [asdict(f) for f in files]}, prefix="wheel-information-")
    return files


def entry_data_files(entry_dir: Path, files: list[Path], eval_digest: str | None) -> list[AuditedFile]:
    """Every file of the entry folder that is not code, with what it looks like."""
    found = []
    for path in files:
        rel = path.relative_to(entry_dir).as_posix()
        with open(path, "rb") as fh:
            head = fh.read(16)
        size = path.stat().st_size
        why = suspicion(rel, size, head, eval_digest, sha256_file(path) if eval_digest else None)
        code = Path(rel).suffix.lower() in CODE_SUFFIXES or Path(rel).name in ("Dockerfile",)
        if why or not code:
            found.append(AuditedFile(rel, size, "entry", why))
    return found


class _Known:
    """What accounts for a file of the entry's image, known before its export is read: the
    base image's files, the wheels' RECORD rows (the lock's, and the base image's own for
    pip), the entry's files."""

    def __init__(self, base: dict[str, tuple[int, str]], declared: dict[str, tuple[str, int | None]],
                 entry: dict[str, tuple[str, int]]):
        self.base, self.declared, self.entry = base, declared, entry
        self.digests = ({d for _, d in base.values()} | {h for h, _ in declared.values()}
                        | {h for h, _ in entry.values()})
        # what an installed RECORD's measurement depends on (the rows the wheels declare)
        self.declared_key = hashlib.sha256(json.dumps(sorted(declared.items())).encode()).hexdigest()[:32]

    def explains(self, path: str, size: int, digest: str) -> bool:
        """The base's file, the entry's, or a wheel's as its RECORD declares it."""
        if self.base.get(path) == (size, digest) or self.entry.get(path, ("",))[0] == digest:
            return True
        site = SITE_PACKAGES.match(path)
        return site is not None and self.declared.get(site.group(1), ("",))[0] == digest

    def source_size(self, path: str) -> int | None:
        """The size of a source file of the image, when known before the export is read."""
        if path in self.base:
            return self.base[path][0]
        if path in self.entry:
            return self.entry[path][1]
        site = SITE_PACKAGES.match(path)
        return self.declared.get(site.group(1), ("", None))[1] if site else None


class _ImageInformation:
    """The export pass's visitor: the information of every file a build step added, and what
    it needs to judge each ``.pyc`` once every source has gone by."""

    def __init__(self, known: _Known):
        self.known = known
        self.files: list[FileInformation] = []
        self.sources: dict[str, tuple[int, int, bytes | None]] = {}  # .py: size, mtime, source_hash
        # .pyc not accounted for by the base, a wheel or the entry: header, size, and its
        # information when measured (None: its source was known ahead and its header fit it)
        self.pycs: dict[str, tuple[bytecode.PycHeader | None, int, FileInformation | None]] = {}

    def __call__(self, path: str, size: int, mtime: int, digest: str, head: bytes, data: bytes | None) -> None:
        hashed = bytecode.source_hash(data) if data is not None and path.endswith(".py") else None
        self.note(path, size, mtime, digest, head, hashed, lambda: self._measure(path, size, data))

    def note(self, path: str, size: int, mtime: int, digest: str, head: bytes, source_hash: bytes | None,
             measure: Callable[[], FileInformation]) -> None:
        """One file of the image; ``measure`` gives its information when it needs measuring
        (from its bytes in the pass that reads them, or as a layer's record kept it)."""
        if path.endswith(".py"):
            self.sources[path] = (size, mtime, source_hash)
        if self.known.explains(path, size, digest) or digest in self.known.digests:
            return  # accounted for, or a copy of a file that is
        source = bytecode.source_of(path)
        if source is not None:
            header = bytecode.read_header(head)
            ahead = self.known.source_size(source)
            fits = ahead is not None and bytecode.mismatch(header, size, ahead, None, None) is None
            self.pycs[path] = (header, size, None if fits else measure())
            return
        self.files.append(measure())

    def measure_key(self, path: str, digest: str) -> str:
        """What a file's measurement depends on: its path and bytes, and for an installed
        RECORD the rows the wheels declare."""
        site = SITE_PACKAGES.match(path)
        record = site is not None and INSTALLED_RECORD.match(site.group(1)) is not None
        return f"{path}\0{digest}" + (f"\0{self.known.declared_key}" if record else "")

    def measured(self) -> dict[str, FileInformation]:
        """Every measurement taken so far, by path (for a layer's record)."""
        found = {f.path.removeprefix("/"): f for f in self.files}
        found.update({p: m for p, (_, _, m) in self.pycs.items() if m is not None})
        return found

    def _measure(self, path: str, size: int, data: bytes | None) -> FileInformation:
        if data is None:
            return FileInformation("/" + path, "image", size, size, "whole, uncompressed (too large)")
        site = SITE_PACKAGES.match(path)
        record = INSTALLED_RECORD.match(site.group(1)) if site else None
        if record:
            rows = self._undeclared_rows(record.group(1), data)
            return FileInformation("/" + path, "image", size, compressed_size(rows), "rows no wheel declares")
        return FileInformation("/" + path, "image", size, compressed_size(data))

    def _undeclared_rows(self, dist_info: str, data: bytes) -> bytes:
        """An installed RECORD's rows that a wheel does not declare (path and hash), but for
        pip's own: its bookkeeping files, a source's .pyc without a hash, and the files it
        writes outside site-packages (the console scripts; each is counted on its own)."""
        kept = []
        bookkeeping = {f"{dist_info}/{n}" for n in PIP_BOOKKEEPING}
        for line in data.decode("utf-8", "replace").splitlines():
            row = next(csv.reader([line]), [])
            path, digest = (row + ["", ""])[:2]
            if path in bookkeeping or path.startswith("../../../bin/"):
                continue
            if digest.startswith("sha256="):
                raw = digest[7:]
                try:
                    hexed = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).hex()
                except ValueError:
                    hexed = ""
                if self.known.declared.get(path, ("",))[0] == hexed:
                    continue
            elif not digest and (bytecode.source_of(path) or "") in self.known.declared:
                continue
            kept.append(line)
        return "\n".join(kept).encode()

    def finish(self) -> set[str]:
        """Judge each ``.pyc`` against its source; the information of those that are not its
        compilation joins the others. Returns the paths of the ``.pyc`` accounted for."""
        compiled = set()
        for path, (header, size, measured) in sorted(self.pycs.items()):
            source = bytecode.source_of(path)
            found = self.sources.get(source) if source is not None else None
            size_, mtime, hashed = found if found else (None, None, None)
            if bytecode.mismatch(header, size, size_, mtime, hashed) is None:
                compiled.add(path)
            else:
                self.files.append(measured or FileInformation("/" + path, "image", size, size,
                                                              "whole, uncompressed (not its source's compilation)"))
        return compiled


def inspect_image(engine: Engine, image_id: str, base_id: str,
                wheels: list[Path] | Callable[[], list[Path]],
                entry_dir: Path, entry_file_list: list[Path], eval_inputs: Path | None,
                eval_labels: Path | None = None, *, lock: Path | None = None,
                budget: tuple[int, str] | None = None) -> ImageInspection:
    """Audit an entry image (cached per image and evaluation set: an image never changes).
    ``eval_inputs`` and ``eval_labels`` are the runner's staged evaluation images and labels
    (host-side), searched for by content in every file of the image and of the wheels.
    ``wheels`` may be a callable: resolving the lock's wheels is then left to a cache miss.
    ``lock``: the run's lock (its hashes carry no information); ``budget``: the information
    budget and where it comes from (``information.DEFAULT_BUDGET_BYTES`` when None)."""
    audit = _inspect(engine, image_id, base_id, wheels, entry_dir, entry_file_list, eval_inputs, eval_labels, lock)
    if budget is not None:  # the task's, applied to a kept answer too
        audit.information.budget, audit.information.budget_from = budget
    return audit


def _eval_variant(eval_inputs: Path | None, eval_labels: Path | None) -> tuple[str | None, str | None, str]:
    """(the evaluation images' sha256, the labels', the name of the evaluation set's variant of
    a kept answer)."""
    eval_digest = sha256_file(eval_inputs) if eval_inputs and eval_inputs.is_file() else None
    labels_digest = sha256_file(eval_labels) if eval_labels and eval_labels.is_file() else None
    return eval_digest, labels_digest, f"-{eval_digest or 'none'}" + (f"-{labels_digest[:16]}" if labels_digest else "")


def read_ahead(engine: Engine, base_id: str, wheels: list[Path], eval_inputs: Path | None,
               eval_labels: Path | None, stop: threading.Event | None = None) -> None:
    """What an inspection reads that depends on neither the entry's code nor its image, read
    ahead and kept as the inspection keeps it: the base image's files and the lock's wheels
    searched for the evaluation set and measured. On a fresh machine this runs while the
    framework layer installs (pip in a container, one core), so the inspection after the build
    reads only the image's own layers. Nothing here decides a verdict the inspection would not
    decide the same way: it finds these answers kept under the same keys, or reads them itself.
    ``stop``: set when the run it reads for has ended (a failed build); it stops after the
    piece of work in hand (one wheel at most), so it never competes with what comes next."""
    def stopped() -> bool:
        return stop is not None and stop.is_set()

    _base_index(engine, base_id)
    if stopped():
        return
    _base_wheel_rows(engine, base_id)
    eval_digest, labels_digest, variant = _eval_variant(eval_inputs, eval_labels)
    content = EvalIndex.from_files(eval_inputs, eval_labels) if eval_digest or labels_digest else None
    allowlist = load_allowlist()
    for wheel in wheels:
        if stopped():
            return
        if content is not None:
            wheel_copies([wheel], content, variant)
        locked_wheels([wheel], allowlist, wheel_information)


def _inspect(engine: Engine, image_id: str, base_id: str,
             wheels: list[Path] | Callable[[], list[Path]], entry_dir: Path, entry_file_list: list[Path],
             eval_inputs: Path | None, eval_labels: Path | None, lock: Path | None) -> ImageInspection:
    eval_digest, labels_digest, variant = _eval_variant(eval_inputs, eval_labels)
    allowlist = load_allowlist()
    kept_as = f"{variant}-w{allowlist.digest[:12]}"  # an answer holds for one allow-list too
    data = image_cache.load("image-audits", image_id, suffix=kept_as)
    if data is not None and data.get("format") == AUDIT_FORMAT:
        try:
            return ImageInspection.from_dict(data)
        except (KeyError, TypeError, ValueError):
            pass  # a damaged answer: audit again
    if callable(wheels):
        wheels = wheels()
    base = _base_index(engine, base_id)
    declared = _base_wheel_rows(engine, base_id)
    for wheel in wheels:
        declared.update(_record_rows(wheel))
    entry_hashes = {f"entry/{p.relative_to(entry_dir).as_posix()}": (sha256_file(p), p.stat().st_size)
                    for p in entry_file_list}
    known = _Known(base, declared, entry_hashes)
    content = EvalIndex.from_files(eval_inputs, eval_labels) if eval_digest or labels_digest else None
    # A file that is a locked wheel's member byte for byte is searched in its wheel (below, kept
    # per wheel and evaluation set), not a second time in the image: on a fresh machine that
    # was the venv's gigabyte searched twice. A layer's copies then hold for this lock only.
    locked: dict[str, str] = {}
    for wheel in wheels:
        locked.update({name: digest for name, (digest, _) in _record_rows(wheel).items()})
    lock_key = hashlib.sha256(json.dumps(sorted(locked.items())).encode()).hexdigest()[:16]

    def searched(path: str, size: int, digest: str) -> bool:
        site = SITE_PACKAGES.match(path)
        return site is not None and locked.get(site.group(1)) == digest

    by_layers = _by_layers(_LayerRead(engine, image_id, content, f"{variant}-l{lock_key}", known, searched))
    if by_layers is not None:
        image_files, measure, copies, left_packed = by_layers
    else:
        measure, copies = _ImageInformation(known), []
        image_files = _file_index(engine, image_id, content, copies, measure, searched)
        left_packed = list(content.left_packed) if content is not None else []
    compiled = measure.finish()
    if content is not None:
        in_wheels, packed = wheel_copies(wheels, content, variant)
        copies += in_wheels
        left_packed += packed
    eval_items, eval_label_run = eval_totals(copies)
    information = measure_entry(entry_dir, entry_file_list, lock)
    information.files += sorted(measure.files, key=lambda f: f.path)
    # The image pass leaves every locked wheel's installed files aside (they are the wheel's,
    # by its RECORD); those of a wheel off the allow-list count here, from the wheel itself.
    information.wheels, wheel_files = locked_wheels(wheels, allowlist, wheel_information)
    information.files += wheel_files
    audit = ImageInspection(
        entry_data_files=entry_data_files(entry_dir, entry_file_list, eval_digest),
        wheel_data_files=wheel_data_files(wheels),
        eval_copies=sorted(copies, key=lambda c: c.path),
        eval_items=eval_items,
        eval_label_run=eval_label_run,
        entry_scan=scan_entry(entry_dir, entry_file_list),
        left_packed=left_packed,
        information=information,
    )
    for path, (size, digest, head) in sorted(image_files.items()):
        if known.explains(path, size, digest) or path in compiled:
            continue  # the base's, the entry's, a wheel's, or the compilation of a source beside it
        audit.unexplained.append(AuditedFile("/" + path, size, "image", suspicion(path, size, head, eval_digest, digest)))
    image_cache.store("image-audits", image_id, audit.to_dict(), suffix=kept_as)
    return audit


# -- layer by layer (issue 50): each layer read once, its facts kept by its diff id -------------

class _LayerRead:
    """One image read layer by layer (``layers``): each layer not kept is parsed, its files
    hashed, searched for the evaluation set and, with ``known``, measured as the merged pass
    would; a kept layer's bytes are only hashed. ``run`` is None when the engine has no
    layers or the stream is not the image's own (the caller then reads the merged export)."""

    def __init__(self, engine: Engine, image_id: str, content: EvalIndex | None, variant: str,
                 known: _Known | None, searched: Searched | None = None):
        self.engine, self.image_id, self.content, self.variant, self.known = engine, image_id, content, variant, known
        self.searched = searched

    def run(self, force: frozenset[str] = frozenset()) -> layers.Pass | None:
        folders = getattr(self.engine, "image_layer_folders", None)
        answer = folders(self.image_id) if folders is not None else None
        if answer is not None:
            info, layer_folders = answer
            try:
                return self._from_folders(info, layer_folders, force)
            except OSError:
                pass  # the store changed under it (an image removed meanwhile): the engine's stream decides
        return self._from_stream(force)

    def _kept(self, diff_id: str) -> layers.LayerFacts | None:
        """The facts kept for ``diff_id`` that serve this inspection (they hold its
        evaluation-set variant's search), or None."""
        facts = layers.load(diff_id)
        return facts if facts is not None and (self.content is None or self.variant in facts.copies) else None

    def _from_folders(self, info, folders: list[Path], force: frozenset[str]) -> layers.Pass:
        """The layers read in place in the engine's store: a kept layer is not read at all (its
        folder is the one the engine's layer database gives for its diff id) but where it was
        not searched for this evaluation set (then only its files no locked wheel explains
        are read); the others, and those in ``force``, are parsed from their folders."""
        config = info.id.removeprefix("sha256:")
        found: list[layers.LayerFacts] = []
        parsed = parsed_bytes = 0
        with reporter().phase("inspect", f"reading image {config[:12]} layer by layer, in the engine's store",
                              keep=True) as phase:
            for diff_id, folder in zip(info.layers, folders):
                facts = None if diff_id in force else layers.load(diff_id)
                if facts is not None and self.content is not None and self.variant not in facts.copies:
                    facts = self._search(facts, folder, phase.read)
                if facts is None:
                    facts = self._parse(functools.partial(_folder_parse, folder, diff_id), phase.read)
                    parsed += 1
                    parsed_bytes += sum(f.size for f in facts.files.values())
                found.append(facts)
        return layers.Pass(found, parsed, parsed_bytes, 0)

    def _search(self, facts: layers.LayerFacts, folder: Path,
                progress: Callable[[int], None]) -> layers.LayerFacts | None:
        """A kept layer searched for this evaluation set (its copies and packed files added and
        kept): every file but those a locked wheel explains byte for byte (their wheel is
        searched) read from the layer's folder. None where a file is not the one kept (then
        the layer is parsed whole)."""
        assert self.content is not None
        before = len(self.content.left_packed)
        copies: list[Copy] = []
        for path, kept in facts.files.items():
            if self.searched is not None and self.searched(path, kept.size, kept.sha256):
                continue
            if path.startswith("/") or ".." in path.split("/"):
                return None  # not a name a layer folder has: parse it whole
            try:
                fd = os.open(folder / path, os.O_RDONLY | os.O_NOFOLLOW)
                with os.fdopen(fd, "rb", buffering=0) as fh:
                    size, digest, _ = index_file(path, kept.size, kept.mtime, fh, self.content, copies, None)
            except OSError:
                return None
            if (size, digest) != (kept.size, kept.sha256):
                return None
            progress(size)
        facts.copies[self.variant] = (copies, list(self.content.left_packed[before:]))
        layers.store(facts)
        return facts

    def _from_stream(self, force: frozenset[str]) -> layers.Pass | None:
        read = getattr(self.engine, "image_layers", None)
        answer = read(self.image_id) if read is not None else None
        if answer is None:
            return None
        info, chunks = answer
        expected = list(info.layers)
        kept = {d: f for d in set(expected) - force if (f := self._kept(d)) is not None}
        sizes = {f.size for f in kept.values()}
        found: dict[str, layers.LayerFacts | None] = {}
        order: list[str] | None = None
        parsed = parsed_bytes = hashed_bytes = 0
        config = info.id.removeprefix("sha256:")
        stack = ExitStack()
        try:
            phase = stack.enter_context(reporter().phase("inspect", f"reading image {config[:12]} layer by layer",
                                                       keep=True))
            stream = io.BufferedReader(_Chunks(chunks), buffer_size=1 << 20)
            for member, fh in layers.image_members(stream):
                if fh is None:
                    continue
                if member.name in (f"{config}.json", f"blobs/sha256/{config}"):
                    order = self._order(fh.read(), info.id)
                elif member.name.endswith(".tar") or (member.name.startswith("blobs/sha256/")
                                                       and "sha256:" + member.name[13:] in expected):
                    if member.size in sizes:
                        diff_id, size = layers.hash_layer(fh, phase.advance)
                        found[diff_id] = kept.get(diff_id)
                        hashed_bytes += size
                    else:
                        facts = self._parse(functools.partial(_tar_parse, fh, member.size), phase.read)
                        found[facts.diff_id] = facts
                        parsed, parsed_bytes = parsed + 1, parsed_bytes + member.size
        finally:
            stack.close()
            chunks.close()
        if order != expected or set(found) != set(expected):
            return None  # not the image's own layers: the merged export decides
        missed = frozenset(d for d, f in found.items() if f is None)
        if missed:
            return self._from_stream(force | missed)  # a kept record's size, not its bytes: parse it
        return layers.Pass([f for d in expected if (f := found[d]) is not None], parsed, parsed_bytes, hashed_bytes)

    @staticmethod
    def _order(config: bytes, image_id: str) -> list[str] | None:
        """The diff ids the image's configuration names, when it is the image's own."""
        if "sha256:" + hashlib.sha256(config).hexdigest() != image_id:
            return None
        try:
            return list(json.loads(config)["rootfs"]["diff_ids"])
        except (ValueError, KeyError, TypeError):
            return None

    def _parse(self, parse: Callable[[layers.ReadFile], tuple[layers.LayerFacts, str]],
               progress: Callable[[int], None]) -> layers.LayerFacts:
        """One layer parsed by ``parse`` (its tar or its folder, given the file reader), its
        facts kept."""
        measure = _ImageInformation(self.known) if self.known is not None else None
        copies: list[Copy] = []
        packed: list[str] = []
        wheel_rows: dict[str, dict[str, list]] = {}

        def read_file(path: str, size: int, mtime: int, member) -> layers.FileFacts:
            before = len(self.content.left_packed) if self.content is not None else 0
            visits: list[tuple] = []
            index_file(path, size, mtime, member, self.content, copies, lambda *a: visits.append(a), self.searched)
            ((_, _, _, digest, head, data),) = visits
            if measure is not None:
                measure(*visits[0])
            if path.endswith(".whl") and data is not None:
                rows: dict[str, tuple[str, int | None]] = {}
                _base_wheel_visitor(rows)(*visits[0])
                wheel_rows[path] = {k: list(v) for k, v in rows.items()}
            if self.content is not None:
                packed.extend(self.content.left_packed[before:])
            hashed = bytecode.source_hash(data) if data is not None and path.endswith(".py") else None
            progress(size)
            return layers.FileFacts(size, digest, head, mtime, hashed)

        facts, diff_id = parse(read_file)
        facts.wheel_rows = wheel_rows
        if measure is not None:
            facts.measured = {measure.measure_key(p, facts.files[p].sha256): m for p, m in measure.measured().items()}
        if self.content is not None:
            facts.copies[self.variant] = (copies, packed)
        if (old := layers.load(diff_id)) is not None:  # keep what other entries' passes kept
            facts.measured = {**old.measured, **facts.measured}
            facts.copies = {**old.copies, **facts.copies}
        layers.store(facts)
        return facts


def _folder_parse(folder: Path, diff_id: str, read_file: layers.ReadFile) -> tuple[layers.LayerFacts, str]:
    return layers.parse_folder(folder, diff_id, read_file), diff_id


def _tar_parse(fh, size: int, read_file: layers.ReadFile) -> tuple[layers.LayerFacts, str]:
    return layers.parse_layer(fh, size, read_file)


def _merged(read: layers.Pass, variant: str) -> tuple[dict[str, tuple[layers.FileFacts, int]], list[Copy],
                                                      list[str]]:
    """The merged view, and the copies (of the evaluation set ``variant``) and packed files of
    the files it holds, each from the layer its file comes from."""
    merged = layers.merge(read.layers)
    copies: list[Copy] = []
    packed: list[str] = []
    for k, layer in enumerate(read.layers):
        mine = {"/" + p for p, (_, at) in merged.items() if at == k}
        variant_copies, variant_packed = layer.copies.get(variant, ([], []))
        copies += [c for c in variant_copies if c.path in mine]
        packed += [p for p in variant_packed if p in mine]
    return merged, copies, packed


def _by_layers(reader: _LayerRead) -> tuple[dict[str, tuple[int, str, bytes]], _ImageInformation,
                                            list[Copy], list[str]] | None:
    """``_file_index`` of an image and its measured visitor, read layer by layer; None when
    the engine has no layers to read (or they are not the image's own)."""
    assert reader.known is not None
    force: frozenset[str] = frozenset()
    while True:
        read = reader.run(force)
        if read is None:
            return None
        merged, copies, packed = _merged(read, reader.variant)
        measure = _ImageInformation(reader.known)
        missing: set[str] = set()
        for path, (facts, k) in merged.items():
            key = measure.measure_key(path, facts.sha256)
            layer = read.layers[k]

            def kept(key=key, layer=layer, missing=missing) -> FileInformation:
                if key not in layer.measured:
                    missing.add(layer.diff_id)
                    return FileInformation("", "image", 0, 0)
                return layer.measured[key]

            measure.note(path, facts.size, facts.mtime, facts.sha256, facts.head, facts.source_hash, kept)
        if not missing:
            index = {p: (f.size, f.sha256, f.head) for p, (f, _) in merged.items()}
            return index, measure, copies, packed
        if missing <= force:  # parsed with this knowledge and still unmeasured: never, but never loop
            return None
        force |= missing  # measured under another entry's knowledge: read those layers again
