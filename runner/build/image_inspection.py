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
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import docker

from runner import image_cache
from runner.build.entry_scan import EntryScan, scan_entry
from runner.build.eval_copies import ITEMS_MIN, LABEL_RUN_MIN, UNPACK_BYTES, WHOLE_BYTES, Copy, EvalIndex
from runner.digests import sha256_file
from runner.engine.containers import owned_labels
from runner.engine.kinds import create_options

AUDIT_FORMAT = 3  # 3: the content search and the entry scan (2 was their draft)
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
        }

    @classmethod
    def from_dict(cls, data: dict) -> "ImageInspection":
        return cls(
            *[[AuditedFile(**f) for f in data[k]] for k in ("unexplained", "entry_data_files", "wheel_data_files")],
            eval_copies=[Copy(**c) for c in data.get("eval_copies", [])],
            eval_items=int(data.get("eval_items", 0)),
            eval_label_run=int(data.get("eval_label_run", 0)),
            entry_scan=EntryScan.from_dict(data.get("entry_scan", {})),
            left_packed=list(data.get("left_packed", [])),
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


def _file_index(client: docker.DockerClient, image_id: str, content: EvalIndex | None = None,
                copies: list[Copy] | None = None) -> dict[str, tuple[int, str, bytes]]:
    """``{path: (size, sha256, first bytes)}`` of every regular file, from the engine's export;
    with ``content``, every file is also searched for the evaluation set in the same pass,
    and what is found goes to ``copies``."""
    container = client.containers.create(image_id, command=["true"], network_mode="none", entrypoint=[],
                                        labels=owned_labels("image-audit"), **create_options())
    try:
        stream = io.BufferedReader(_Chunks(container.export(chunk_size=1 << 20)), buffer_size=1 << 20)
        return index_tar(stream, content, copies)
    finally:
        container.remove(force=True)


def index_tar(stream, content: EvalIndex | None = None,
              copies: list[Copy] | None = None) -> dict[str, tuple[int, str, bytes]]:
    """``_file_index`` of an export stream (a tar), read once."""
    index: dict[str, tuple[int, str, bytes]] = {}
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            if not member.isreg():
                continue
            fh = tar.extractfile(member)
            path = member.name.lstrip("./")
            digest = hashlib.sha256()
            found = None
            if member.size <= WHOLE_BYTES:
                data = fh.read()
                digest.update(data)
                head = data[:16]
                if content is not None:
                    found = content.scan_bytes("/" + path, data)
            else:
                head = fh.read(16)
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
            index[path] = (member.size, digest.hexdigest(), head)
    return index


def base_file_index(client: docker.DockerClient, base_id: str) -> dict[str, tuple[int, str]]:
    """``{path: (size, sha256)}`` of every regular file of a base image (kept per image id)."""
    return _base_index(client, base_id)


def _base_index(client: docker.DockerClient, base_id: str) -> dict[str, tuple[int, str]]:
    kept = image_cache.load("image-audits", base_id, prefix="base-")
    if kept is not None:
        return {k: tuple(v) for k, v in kept.items()}
    index = {path: (size, digest) for path, (size, digest, _) in _file_index(client, base_id).items()}
    image_cache.store("image-audits", base_id, index, prefix="base-")
    return index


def _record_hashes(wheel: Path) -> dict[str, str]:
    """Paths under site-packages -> hex sha256, as the wheel's RECORD declares them."""
    found: dict[str, str] = {}
    with zipfile.ZipFile(wheel) as z:
        records = [n for n in z.namelist() if n.endswith(".dist-info/RECORD")]
        for name in records:
            for row in csv.reader(io.StringIO(z.read(name).decode())):
                if len(row) >= 2 and row[1].startswith("sha256="):
                    raw = base64.urlsafe_b64decode(row[1][7:] + "=" * (-len(row[1][7:]) % 4))
                    found[row[0]] = raw.hex()
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


def inspect_image(client: docker.DockerClient, image_id: str, base_id: str,
                wheels: list[Path] | Callable[[], list[Path]],
                entry_dir: Path, entry_file_list: list[Path], eval_inputs: Path | None,
                eval_labels: Path | None = None) -> ImageInspection:
    """Audit an entry image (cached per image and evaluation set: an image never changes).
    ``eval_inputs`` and ``eval_labels`` are the runner's staged evaluation images and labels
    (host-side), searched for by content in every file of the image and of the wheels.
    ``wheels`` may be a callable: resolving the lock's wheels is then left to a cache miss."""
    eval_digest = sha256_file(eval_inputs) if eval_inputs and eval_inputs.is_file() else None
    labels_digest = sha256_file(eval_labels) if eval_labels and eval_labels.is_file() else None
    variant = f"-{eval_digest or 'none'}" + (f"-{labels_digest[:16]}" if labels_digest else "")
    data = image_cache.load("image-audits", image_id, suffix=variant)
    if data is not None and data.get("format") == AUDIT_FORMAT:
        try:
            return ImageInspection.from_dict(data)
        except (KeyError, TypeError, ValueError):
            pass  # a damaged answer: audit again
    if callable(wheels):
        wheels = wheels()
    content = EvalIndex.from_files(eval_inputs, eval_labels) if eval_digest or labels_digest else None
    copies: list[Copy] = []
    image_files = _file_index(client, image_id, content, copies)
    left_packed = list(content.left_packed) if content is not None else []
    if content is not None:
        in_wheels, packed = wheel_copies(wheels, content, variant)
        copies += in_wheels
        left_packed += packed
    base = _base_index(client, base_id)
    declared = {}
    for wheel in wheels:
        declared.update(_record_hashes(wheel))
    entry_hashes = {f"entry/{p.relative_to(entry_dir).as_posix()}": sha256_file(p) for p in entry_file_list}
    eval_items, eval_label_run = eval_totals(copies)
    audit = ImageInspection(
        entry_data_files=entry_data_files(entry_dir, entry_file_list, eval_digest),
        wheel_data_files=wheel_data_files(wheels),
        eval_copies=sorted(copies, key=lambda c: c.path),
        eval_items=eval_items,
        eval_label_run=eval_label_run,
        entry_scan=scan_entry(entry_dir, entry_file_list),
        left_packed=left_packed,
    )
    for path, (size, digest, head) in sorted(image_files.items()):
        if base.get(path) == (size, digest) or entry_hashes.get(path) == digest:
            continue
        site = SITE_PACKAGES.match(path)
        if site and (declared.get(site.group(1)) == digest or "__pycache__/" in path):
            continue  # from a locked wheel, or bytecode pip compiled from it
        audit.unexplained.append(AuditedFile("/" + path, size, "image", suspicion(path, size, head, eval_digest, digest)))
    image_cache.store("image-audits", image_id, audit.to_dict(), suffix=variant)
    return audit
