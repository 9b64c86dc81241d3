"""Opening a bundle someone else made, safely: a ``.tar.gz`` or a folder, copied into a
fresh temporary folder after every member is checked.

Refused: absolute paths, ``..``, links (symbolic or hard), devices and other special
files, duplicate names, too many files, a file or a total too large (the runner's own files,
result.json, events.jsonl, the bundle's bookkeeping and other top-level JSON, within the caps
``runner.safe_read`` keeps for their kind), a sparse file of a folder (its blocks far fewer
than its size says: never copied), and a compression ratio only a zip bomb has. A folder's
files are opened without blocking and without following a link. Nothing is written outside
the fresh folder.
"""

from __future__ import annotations

import os
import stat
import tarfile
import tempfile
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from runner import safe_read
from runner.errors import UserError

_CHUNK = 1 << 20
# A folder's file this much larger than the blocks it holds is sparse (a hole of many GiB a
# honest run never writes); small files are left alone (a file system may pack them).
SPARSE_FLOOR = 64 << 20
SPARSE_RATIO = 8


def kind_of_member(rel: PurePosixPath) -> str | None:
    """The ``runner.safe_read`` kind whose cap a bundle's file is held to: the runner's own
    files (result.json, events.jsonl, the bundle's bookkeeping, top-level JSON records); None
    for the others (checkpoints, predictions, the entry's outputs), held to ``Limits``."""
    if rel.as_posix() == "result.json":
        return "result"
    if rel.as_posix() == "events.jsonl":
        return "events"
    if (len(rel.parts) == 2 and rel.parts[0] == "bundle") or (len(rel.parts) == 1 and rel.suffix == ".json"):
        return "json"
    return None


@dataclass(frozen=True)
class Limits:
    max_files: int = 20_000
    max_file_bytes: int = 4 << 30  # one model file of a large entry
    max_total_bytes: int = 16 << 30
    max_ratio: float = 200.0  # uncompressed / compressed bytes ...
    ratio_floor_bytes: int = 64 << 20  # ... once the archive unpacks to more than this


class UnsafeBundleError(UserError):
    """The bundle cannot be opened safely; it is never partly trusted."""


@dataclass
class OpenedBundle:
    """A bundle's files in a private temporary folder; ``close()`` (or ``with``) removes it."""

    root: Path
    source: Path
    _tmp: tempfile.TemporaryDirectory | None = field(default=None, repr=False)

    def close(self) -> None:
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> OpenedBundle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _refuse(source: Path, problem: str) -> UnsafeBundleError:
    return UnsafeBundleError(f"unsafe bundle {source}: {problem}", "do not trust this bundle; ask its publisher for a clean one")


def safe_relative(name: str) -> PurePosixPath:
    """The member name as a relative path, or ValueError if it could escape the folder."""
    if not name or "\x00" in name or "\\" in name:
        raise ValueError(f"bad member name {name!r}")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ValueError(f"absolute path {name!r}")
    parts = name.rstrip("/").split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"path {name!r} contains '..', '.' or an empty part")
    return PurePosixPath(*parts)


class _Budget:
    def __init__(self, source: Path, limits: Limits, packed: bool = False):
        self.source, self.limits, self.packed = source, limits, packed
        self.files = 0
        self.total = 0
        self.top: str | None = None  # a packed bundle's top folder (its run id), from its first file

    def add_file(self, name: str, size: int) -> None:
        self.files += 1
        if self.files > self.limits.max_files:
            raise _refuse(self.source, f"more than {self.limits.max_files} files")
        if size > self.limits.max_file_bytes:
            raise _refuse(self.source, f"{name} is {size} bytes, over the {self.limits.max_file_bytes}-byte limit")
        rel = PurePosixPath(name)
        if self.packed and self.files == 1 and len(rel.parts) > 1:
            self.top = rel.parts[0]
        if self.top is not None and len(rel.parts) > 1 and rel.parts[0] == self.top:
            rel = PurePosixPath(*rel.parts[1:])
        kind = kind_of_member(rel)
        if kind is not None and size > safe_read.LIMITS[kind]:
            raise _refuse(self.source, f"{name} is {safe_read.size_text(size)}, over the "
                          f"{safe_read.size_text(safe_read.LIMITS[kind])} such a file may hold")

    def check_declared(self, name: str, size: int, compressed: int) -> None:
        """Refuse a member from its header, before writing it: the total it would bring,
        and the ratio to the archive's compressed size a zip bomb has."""
        projected = self.total + size
        if projected > self.limits.max_total_bytes:
            raise _refuse(self.source, f"more than {self.limits.max_total_bytes} bytes in all (at {name})")
        if projected > self.limits.ratio_floor_bytes and projected / compressed > self.limits.max_ratio:
            raise _refuse(
                self.source,
                f"{name} would unpack to over {self.limits.max_ratio:g} times the archive's "
                "compressed size (a zip bomb?)",
            )

    def add_bytes(self, name: str, n: int) -> None:
        self.total += n
        if self.total > self.limits.max_total_bytes:
            raise _refuse(self.source, f"more than {self.limits.max_total_bytes} bytes in all (at {name})")


def _copy_limited(src, dest: Path, name: str, declared: int, budget: _Budget) -> None:
    # O_EXCL: a name seen twice, or a path laid over an existing one, is refused, not overwritten.
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    written = 0
    with os.fdopen(fd, "wb") as out:
        while chunk := src.read(_CHUNK):
            written += len(chunk)
            if written > declared:
                raise _refuse(budget.source, f"{name} holds more bytes than its header says")
            budget.add_bytes(name, len(chunk))
            out.write(chunk)


def _make_parent(dest_root: Path, rel: PurePosixPath) -> Path:
    target = dest_root.joinpath(*rel.parts)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Belt and braces: the resolved target must still be inside the fresh folder.
    if not target.resolve().is_relative_to(dest_root.resolve()):
        raise ValueError(f"{rel} resolves outside the folder")
    return target


def _extract_tar(source: Path, dest: Path, limits: Limits) -> None:
    budget = _Budget(source, limits, packed=True)
    compressed = max(1, source.stat().st_size)
    seen: set[str] = set()
    try:
        with tarfile.open(source, mode="r:gz") as tar:
            for member in tar:
                try:
                    rel = safe_relative(member.name)
                except ValueError as err:
                    raise _refuse(source, str(err)) from None
                key = rel.as_posix()
                if member.issym() or member.islnk():
                    raise _refuse(source, f"{key} is a link (to {member.linkname!r})")
                if member.isdir():
                    _make_parent(dest, rel).mkdir(exist_ok=True)
                    continue
                if member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE):
                    raise _refuse(source, f"{key} is a special file (tar type {member.type!r})")
                if key in seen:
                    raise _refuse(source, f"{key} appears twice")
                seen.add(key)
                budget.add_file(key, member.size)
                budget.check_declared(key, member.size, compressed)  # before a byte is written
                try:
                    target = _make_parent(dest, rel)
                except (ValueError, FileExistsError, NotADirectoryError) as err:
                    raise _refuse(source, f"{key}: {err}") from None
                src = tar.extractfile(member)
                if src is None:
                    raise _refuse(source, f"{key} has no data")
                try:
                    _copy_limited(src, target, key, member.size, budget)
                except FileExistsError:
                    raise _refuse(source, f"{key} clashes with another member") from None
                if budget.total > limits.ratio_floor_bytes and budget.total / compressed > limits.max_ratio:
                    raise _refuse(
                        source, f"unpacks to over {limits.max_ratio:g} times its compressed size (a zip bomb?)"
                    )
    except (tarfile.TarError, EOFError, OSError) as err:
        raise _refuse(source, f"not a readable .tar.gz ({type(err).__name__}: {err})") from None


def _copy_folder(source: Path, dest: Path, limits: Limits) -> None:
    budget = _Budget(source, limits)
    for dirpath, dirnames, filenames in os.walk(source, followlinks=False):
        for name in sorted(dirnames + filenames):
            full = Path(dirpath) / name
            rel = PurePosixPath(full.relative_to(source).as_posix())
            st = full.lstat()
            if stat.S_ISLNK(st.st_mode):
                raise _refuse(source, f"{rel} is a symbolic link")
            if stat.S_ISDIR(st.st_mode):
                continue
            if not stat.S_ISREG(st.st_mode):
                raise _refuse(source, f"{rel} is a special file")
            if st.st_nlink > 1:
                raise _refuse(source, f"{rel} is hard-linked elsewhere")
            if st.st_size > SPARSE_FLOOR and st.st_blocks * 512 * SPARSE_RATIO < st.st_size:
                raise _refuse(source, f"{rel} is a sparse file ({safe_read.size_text(st.st_size)} by its size, "
                              f"{safe_read.size_text(st.st_blocks * 512)} on disk): not copied")
            budget.add_file(str(rel), st.st_size)
            target = _make_parent(dest, rel)
            try:
                src, _ = safe_read.open_file(full, "data")  # never blocks, never follows a link
            except safe_read.Unreadable as err:
                raise _refuse(source, f"{rel} {err.why}") from None
            with src:
                _copy_limited(src, target, str(rel), st.st_size, budget)


def _single_top_folder(dest: Path) -> Path:
    """A packed bundle holds one top folder (its run id); a folder bundle does not."""
    children = list(dest.iterdir())
    if len(children) == 1 and children[0].is_dir() and not (dest / "result.json").exists():
        return children[0]
    return dest


def open_bundle(path: Path | str, limits: Limits | None = None) -> OpenedBundle:
    """Copy a bundle (``.tar.gz`` or folder) into a fresh temporary folder, checking as it goes."""
    source = Path(path)
    if source.is_symlink():
        raise _refuse(source, "the bundle path itself is a symbolic link")
    if not source.exists():
        raise UserError(f"no bundle at {source}", "pass a result folder or a .tar.gz made by runner")
    tmp = tempfile.TemporaryDirectory(prefix="runner-verify-")
    dest = Path(tmp.name) / "bundle"
    dest.mkdir()
    try:
        if source.is_dir():
            _copy_folder(source, dest, limits or Limits())
        elif source.is_file():
            with open(source, "rb") as fh:
                if fh.read(2) != b"\x1f\x8b":
                    raise _refuse(source, "not a gzip file")
            _extract_tar(source, dest, limits or Limits())
        else:
            raise _refuse(source, "neither a folder nor a file")
    except BaseException:
        tmp.cleanup()
        raise
    return OpenedBundle(_single_top_folder(dest), source, tmp)


def open_results(given: Iterable[Path | str], stack: ExitStack, limits: Limits | None = None) -> list[Path]:
    """What every command that reads results takes: each path a result folder, read where it
    is, or a bundle's ``.tar.gz``, opened safely (as ``runner verify`` opens it) into a
    temporary folder that ``stack`` removes."""
    folders = []
    for path in map(Path, given):
        if path.is_file():
            folders.append(stack.enter_context(open_bundle(path, limits or Limits())).root)
        elif path.is_dir():
            folders.append(path)
        else:
            raise UserError(f"no result at {path}", "pass result folders (results/<entry>/<run_id>/) or bundles' .tar.gz")
    return folders
