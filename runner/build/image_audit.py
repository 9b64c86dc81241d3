"""What an entry brings beyond its declared sources (threat-model class 4).

After a build the runner lists, from the engine's own export of the image (never from a
program inside it), every regular file that comes neither from the base image, nor from
a wheel of the lock (as that wheel's RECORD lists it), nor from the entry's source files;
plus every non-code file of the entry folder; plus the data files the lock's wheels
carry outside their test folders. Model weights, data blobs or copies of the evaluation
inputs among them make a result non-conforming, with the file named.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import re
import tarfile
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import docker

from runner import image_cache
from runner.digests import sha256_file
from runner.run.container import owned_labels

AUDIT_FORMAT = 1
AUDIT_FILE = "image-audit.json"
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


@dataclass
class ImageAudit:
    unexplained: list[AuditedFile] = field(default_factory=list)
    entry_data_files: list[AuditedFile] = field(default_factory=list)
    wheel_data_files: list[AuditedFile] = field(default_factory=list)

    @property
    def findings(self) -> list[AuditedFile]:
        return [f for f in self.unexplained + self.entry_data_files + self.wheel_data_files if f.suspect]

    def problem(self) -> str | None:
        """The non-conforming reason, naming the files; None when nothing is suspect."""
        found = self.findings
        if not found:
            return None
        named = ", ".join(f"{f.path} ({f.size} bytes, {f.origin}: {f.suspect})" for f in found[:5])
        more = f" and {len(found) - 5} more" if len(found) > 5 else ""
        return f"class 4 (a model trained before the run): the image carries weights or data: {named}{more}"

    def to_dict(self) -> dict:
        """Everything, for the result folder's image-audit.json."""
        return {
            "format": AUDIT_FORMAT,
            "unexplained": [asdict(f) for f in self.unexplained],
            "entry_data_files": [asdict(f) for f in self.entry_data_files],
            "wheel_data_files": [asdict(f) for f in self.wheel_data_files],
        }

    def summary(self) -> dict:
        """For result.json: the counts and every suspect file."""
        return {
            "unexplained_files": len(self.unexplained),
            "unexplained_bytes": sum(f.size for f in self.unexplained),
            "entry_data_files": len(self.entry_data_files),
            "wheel_data_files": len(self.wheel_data_files),
            "findings": [asdict(f) for f in self.findings],
            "details": AUDIT_FILE,
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


def _file_index(client: docker.DockerClient, image_id: str) -> dict[str, tuple[int, str, bytes]]:
    """``{path: (size, sha256, first bytes)}`` of every regular file, from the engine's export."""
    container = client.containers.create(image_id, command=["true"], network_mode="none", entrypoint=[],
                                        labels=owned_labels("image-audit"))
    index: dict[str, tuple[int, str, bytes]] = {}
    try:
        stream = io.BufferedReader(_Chunks(container.export(chunk_size=1 << 20)), buffer_size=1 << 20)
        with tarfile.open(fileobj=stream, mode="r|") as tar:
            for member in tar:
                if not member.isreg():
                    continue
                fh = tar.extractfile(member)
                digest = hashlib.sha256()
                head = fh.read(16)
                digest.update(head)
                while chunk := fh.read(1 << 20):
                    digest.update(chunk)
                index[member.name.lstrip("./")] = (member.size, digest.hexdigest(), head)
    finally:
        container.remove(force=True)
    return index


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


def audit_image(client: docker.DockerClient, image_id: str, base_id: str, wheels: list[Path],
                entry_dir: Path, entry_file_list: list[Path], eval_inputs: Path | None) -> ImageAudit:
    """Audit an entry image (cached per image: an image never changes)."""
    eval_digest = sha256_file(eval_inputs) if eval_inputs and eval_inputs.is_file() else None
    variant = f"-{eval_digest or 'none'}"
    data = image_cache.load("image-audits", image_id, suffix=variant)
    if data is not None:
        if data.get("format") == AUDIT_FORMAT:
            return ImageAudit(*[[AuditedFile(**f) for f in data[k]]
                                for k in ("unexplained", "entry_data_files", "wheel_data_files")])
    base = _base_index(client, base_id)
    declared = {}
    for wheel in wheels:
        declared.update(_record_hashes(wheel))
    entry_hashes = {f"entry/{p.relative_to(entry_dir).as_posix()}": sha256_file(p) for p in entry_file_list}
    audit = ImageAudit(
        entry_data_files=entry_data_files(entry_dir, entry_file_list, eval_digest),
        wheel_data_files=wheel_data_files(wheels),
    )
    for path, (size, digest, head) in sorted(_file_index(client, image_id).items()):
        if base.get(path) == (size, digest) or entry_hashes.get(path) == digest:
            continue
        site = SITE_PACKAGES.match(path)
        if site and (declared.get(site.group(1)) == digest or "__pycache__/" in path):
            continue  # from a locked wheel, or bytecode pip compiled from it
        audit.unexplained.append(AuditedFile("/" + path, size, "image", suspicion(path, size, head, eval_digest, digest)))
    image_cache.store("image-audits", image_id, audit.to_dict(), suffix=variant)
    return audit
