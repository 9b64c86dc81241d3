"""ImageNet (ILSVRC2012) training set as a read-only tree of JPEGs, never converted.

ImageNet entries read JPEGs with many loader processes, so the 1.28 M training images stay
files: ``<wnid>/<wnid>_<n>.JPEG``, one folder per class, mounted read-only at
``/data/train`` (class index = the WNID's place in sorted order, as for the evaluation
labels). Two sources:

* the official ``ILSVRC2012_img_train.tar`` (a tar of 1000 per-class tars), streamed once:
  every JPEG is extracted into ``<data>/imagenet-train/tree/`` while the outer tar's md5 is
  computed, and checked against the published value at the end (one pass over 140 GB);
* the folder tree it unpacks to, kept where it is: every class folder is checked and every
  file hashed.

Either way the runner keeps a digest manifest (``manifest.tsv``: path, size, mtime, sha256
per file) and ``tree.json`` beside it. Before each run, ``check_tree`` compares the size
and mtime of every file with the manifest (a directory scan, seconds for 1.28 M files) and
re-hashes a random sample; ``full=True`` re-hashes every file. An import that fails leaves
what was imported before untouched.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import secrets
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from runner.errors import UserError
from runner.staging import progress
from runner.staging.checks import Expected, readable_tar
from runner.staging.stage import OLD_MARK, TMP_MARK, data_digest, remove_stale
from runner.tasks.imagenet.source import devkit_wnids

TRAIN_TAR = "ILSVRC2012_img_train.tar"
OFFICIAL = Expected(
    digests={TRAIN_TAR: ("md5", "1d675b47d978889d74fa0da5fadfb00e")},
    counts={"train": 1_281_167, "classes": 1000},
)
RECORD, MANIFEST, TREE = "tree.json", "manifest.tsv", "tree"
SAMPLE = 256  # files re-hashed by each run's check
FIX = f"download the official {TRAIN_TAR} again (https://image-net.org) and import it"
REIMPORT = (
    f"import it again: `runner data import imagenet PATH/{TRAIN_TAR}` (or the folder it "
    "unpacks to), or restore the file"
)
_WNID = re.compile(r"n\d{8}$")
_INNER = re.compile(r"(?:\./)?(n\d{8})\.tar$")
_JPEG = re.compile(r"(n\d{8})_\d+\.JPEG$")
_CHUNK = 1 << 20


def devkit_classes(devkit: Path) -> tuple[str, ...]:
    """The classes every training tree must hold: the devkit's 1000 leaf WNIDs, sorted."""
    return devkit_wnids(devkit)


def is_train_source(path: Path) -> bool:
    """A training tar (by its official name) or a folder tree, rather than the validation tar."""
    path = Path(path)
    return path.is_dir() or path.name == TRAIN_TAR


@dataclass(frozen=True)
class TrainTree:
    """An imported training tree: ``root`` is what is mounted at ``/data/train``."""

    root: Path
    home: Path  # holds tree.json and manifest.tsv
    digest: str  # sha256 over the files' contents (as a staged set's digest)
    manifest_sha256: str
    source: str
    source_digest: str | None
    conforming: bool
    counts: dict[str, int] = field(default_factory=dict)
    in_place: bool = False  # the user's own folder (else extracted into ``home/tree``)

    @property
    def manifest(self) -> Path:
        return self.home / MANIFEST


@dataclass(frozen=True)
class CheckReport:
    files: int
    hashed: int
    seconds: float
    seed: int | None
    full: bool


# -- reading ---------------------------------------------------------------------------------

def load_tree(home: Path) -> TrainTree | None:
    """The tree imported into ``home`` (``<data>/imagenet-train``), or None."""
    record_path = Path(home) / RECORD
    if not record_path.is_file():
        return None
    try:
        record = json.loads(record_path.read_text())
        return TrainTree(
            root=Path(record["root"]) if record.get("in_place") else Path(home) / TREE,
            home=Path(home), digest=record["digest"], manifest_sha256=record["manifest_sha256"],
            source=record["source"], source_digest=record.get("source_digest"),
            conforming=bool(record.get("conforming")), counts=dict(record["counts"]),
            in_place=bool(record.get("in_place")),
        )
    except (ValueError, KeyError, TypeError) as err:
        raise UserError(f"{record_path} is damaged ({err})", REIMPORT) from None


def _manifest_lines(tree: TrainTree) -> list[tuple[str, int, int, str]]:
    raw = tree.manifest.read_bytes() if tree.manifest.is_file() else b""
    if hashlib.sha256(raw).hexdigest() != tree.manifest_sha256:
        raise UserError(f"the manifest {tree.manifest} of the ImageNet training tree is missing or changed",
                        REIMPORT)
    rows = []
    for line in raw.decode().splitlines():
        rel, size, mtime, digest = line.split("\t")
        rows.append((rel, int(size), int(mtime), digest))
    return rows


def _changed(tree: TrainTree, rel: str, why: str) -> UserError:
    return UserError(
        f"the ImageNet training tree {tree.root} has changed since it was imported: {rel} {why}",
        REIMPORT,
    )


def _sha256(path: Path, advance=None) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            if advance:
                advance(len(chunk))
    return h.hexdigest()


def check_tree(tree: TrainTree, *, full: bool = False, sample: int = SAMPLE, seed: int | None = None) -> CheckReport:
    """Every file's size and mtime against the manifest, no file missing or added, and the
    sha256 of ``sample`` files drawn with ``seed`` (a fresh one if None), or of every file
    with ``full``. A difference is a ``UserError`` naming the file."""
    start = time.monotonic()
    rows = _manifest_lines(tree)
    if not tree.root.is_dir():
        raise UserError(f"the ImageNet training tree {tree.root} is gone", REIMPORT)
    classes = sorted({rel.split("/", 1)[0] for rel, *_ in rows})
    present = sorted(e.name for e in os.scandir(tree.root))
    if extra := sorted(set(present) - set(classes)):
        raise _changed(tree, extra[0], "was not imported (an added file or folder)")
    # Stat every file against the manifest, one class folder at a time (rows are sorted).
    by_class: dict[str, list] = {}
    for row in rows:
        by_class.setdefault(row[0].split("/", 1)[0], []).append(row)
    for wnid in classes:
        try:
            entries = {e.name: e for e in os.scandir(tree.root / wnid)}
        except (FileNotFoundError, NotADirectoryError):
            raise _changed(tree, wnid, "(a class folder) is missing") from None
        for rel, size, mtime, _ in by_class[wnid]:
            entry = entries.pop(rel.split("/", 1)[1], None)
            if entry is None:
                raise _changed(tree, rel, "is missing")
            if entry.is_symlink() or not entry.is_file(follow_symlinks=False):
                raise _changed(tree, rel, "is no longer a plain file")
            st = entry.stat(follow_symlinks=False)
            if st.st_size != size:
                raise _changed(tree, rel, f"has {st.st_size} bytes, {size} when imported")
            if st.st_mtime_ns != mtime:
                raise _changed(tree, rel, "was modified (its mtime differs from the import's)")
        if entries:
            raise _changed(tree, f"{wnid}/{sorted(entries)[0]}", "was not imported (an added file)")
    # Then the contents: a sample, or all.
    if full:
        picked, seed = rows, None
    else:
        seed = secrets.randbelow(2**31) if seed is None else seed
        picked = random.Random(seed).sample(rows, min(sample, len(rows)))
    total = sum(size for _, size, _, _ in picked)
    with progress.bar("sha256 ImageNet training tree", total, in_bytes=True) if full else _nobar() as advance:
        for rel, _, _, want in picked:
            if _sha256(tree.root / rel, advance) != want:
                raise _changed(tree, rel, "has different contents (sha256 differs from the manifest)")
    return CheckReport(len(rows), len(picked), time.monotonic() - start, seed, full)


class _nobar:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


# -- importing -------------------------------------------------------------------------------

class _Md5Reader(io.RawIOBase):
    """Reads a file and hashes what it reads, so the tar is checked in the extraction's pass."""

    def __init__(self, path: Path, advance):
        self.fh, self.h, self.advance = open(path, "rb"), hashlib.md5(), advance

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        n = self.fh.readinto(buf)
        if n:
            self.h.update(memoryview(buf)[:n])
            self.advance(n)
        return n

    def drain(self) -> str:
        while self.read(_CHUNK):
            pass
        return self.h.hexdigest()

    def close(self) -> None:
        self.fh.close()
        super().close()


def _write(target: Path, fh, rows: list) -> None:
    h = hashlib.sha256()
    with open(target, "xb") as out:  # "x": a name seen twice is an error, not an overwrite
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
            out.write(chunk)
    os.chmod(target, 0o444)
    st = target.stat()
    rows.append((target.parent.name + "/" + target.name, st.st_size, st.st_mtime_ns, h.hexdigest()))


def _extract_tar(path: Path, tree_dir: Path, expected: Expected) -> tuple[list, str]:
    """Stream the outer tar of per-class tars into ``tree_dir``; return the rows and its md5."""
    rows: list = []
    with progress.bar(f"extracting {path.name}", path.stat().st_size, in_bytes=True) as advance:
        reader = _Md5Reader(path, advance)
        try:
            with readable_tar(path, "tar of per-class tars", FIX), \
                    tarfile.open(fileobj=io.BufferedReader(reader, _CHUNK), mode="r|") as outer:
                for member in outer:
                    match = _INNER.match(member.name)
                    if not member.isfile() or not match:
                        raise UserError(f"{path} holds {member.name}, which is not a per-class tar "
                                        "(n01440764.tar ...): is it ILSVRC2012_img_train.tar?", FIX)
                    wnid = match.group(1)
                    (tree_dir / wnid).mkdir()
                    with tarfile.open(fileobj=outer.extractfile(member), mode="r|") as inner:
                        for item in inner:
                            m = _JPEG.fullmatch(item.name.removeprefix("./"))
                            if not item.isfile() or not m or m.group(1) != wnid:
                                raise UserError(f"{path}: {member.name} holds {item.name}, which is not a "
                                                f"{wnid}_N.JPEG image of its class", FIX)
                            try:
                                _write(tree_dir / wnid / item.name.removeprefix("./"), inner.extractfile(item), rows)
                            except FileExistsError:
                                raise UserError(f"{path}: {member.name} holds {item.name} twice", FIX) from None
            md5 = reader.drain()
        except FileExistsError:
            raise UserError(f"{path} holds two tars of the same class", FIX) from None
        finally:
            reader.close()
    want = expected.digests.get(TRAIN_TAR)
    if want and want[1] != md5:
        raise UserError(f"{path} is not the official {TRAIN_TAR}: its md5 is {md5}, expected {want[1]} "
                        "(corrupted or incomplete download?); nothing was imported", FIX)
    return rows, md5


def _scan_folder(path: Path) -> list[tuple[str, int]]:
    """(relpath, size) of every JPEG of a folder tree in the official layout, checked."""
    fix = f"give the folder {TRAIN_TAR} unpacks to: only <wnid>/<wnid>_N.JPEG files, readable by all"
    found = []
    with progress.step(f"listing {path}"):
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            if not _WNID.match(entry.name) or entry.is_symlink() or not entry.is_dir():
                raise UserError(f"{path} holds {entry.name}, which is not a class folder (n01440764 ...)", fix)
            if entry.stat().st_mode & 0o005 != 0o005:
                raise UserError(f"{path}/{entry.name} cannot be read by the training container's user", fix)
            for f in sorted(os.scandir(entry.path), key=lambda e: e.name):
                m = _JPEG.match(f.name)
                if f.is_symlink() or not f.is_file(follow_symlinks=False) or not m or m.group(1) != entry.name:
                    raise UserError(f"{path} holds {entry.name}/{f.name}, which is not a {entry.name}_N.JPEG "
                                    "image of its class (links are refused too)", fix)
                st = f.stat(follow_symlinks=False)
                if st.st_mode & 0o004 == 0:
                    raise UserError(f"{path}/{entry.name}/{f.name} cannot be read by the training "
                                    "container's user", "run `chmod -R a+rX` on the folder")
                found.append((f"{entry.name}/{f.name}", st.st_size))
    return found


def _hash_folder(path: Path, found: list[tuple[str, int]]) -> list:
    rows = []
    with progress.bar(f"sha256 {path.name}", sum(s for _, s in found), in_bytes=True) as advance:
        for rel, _ in found:
            digest = _sha256(path / rel, advance)
            st = (path / rel).stat()
            rows.append((rel, st.st_size, st.st_mtime_ns, digest))
    return rows


def _check_classes(path: Path, rows: list, expected: Expected) -> dict[str, int]:
    classes = sorted({rel.split("/", 1)[0] for rel, *_ in rows})
    if expected.classes is not None:
        if missing := sorted(set(expected.classes) - set(classes)):
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise UserError(f"{path} lacks class {missing[0]}{more}; nothing was imported", FIX)
        if extra := sorted(set(classes) - set(expected.classes)):
            raise UserError(f"{path} holds class {extra[0]}, which is not an ILSVRC2012 class; "
                            "nothing was imported", FIX)
    want = expected.counts.get("classes")
    if want is not None and len(classes) != want:
        raise UserError(f"{path} has {len(classes):,} class folders, expected {want:,} "
                        "(pass --devkit to name the missing ones); nothing was imported", FIX)
    want = expected.counts.get("train")
    if want is not None and len(rows) != want:
        raise UserError(f"{path} has {len(rows):,} training images, expected {want:,}; nothing was imported",
                        FIX)
    return {"train": len(rows), "classes": len(classes)}


def import_tree(path: Path, home: Path, *, expected: Expected = OFFICIAL) -> TrainTree:
    """Import the official training tar (extracted into ``home/tree``) or its unpacked folder
    (kept in place) into ``home``; replaces an earlier import only once complete."""
    path = Path(path).resolve()
    home = Path(home)
    if not path.exists():
        raise UserError(f"{path} does not exist", f"pass the path of {TRAIN_TAR} or the folder it unpacks to")
    home.parent.mkdir(parents=True, exist_ok=True)
    remove_stale(home.parent, home.name)
    tmp = Path(tempfile.mkdtemp(prefix=f".{home.name}{TMP_MARK}{os.getpid()}-", dir=home.parent))
    try:
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; the tree is meant to be mounted
        if path.is_dir():
            rows = _hash_folder(path, _scan_folder(path))
            source, source_digest, root = f"folder:{path}", None, str(path)
        else:
            (tmp / TREE).mkdir()
            rows, md5 = _extract_tar(path, tmp / TREE, expected)
            source, source_digest, root = f"file:{path.name}", f"md5:{md5}", None
        rows.sort()
        counts = _check_classes(path, rows, expected)
        manifest = "".join(f"{rel}\t{size}\t{mtime}\t{digest}\n" for rel, size, mtime, digest in rows).encode()
        (tmp / MANIFEST).write_bytes(manifest)
        record = {
            "task": "imagenet", "split": "train", "root": root, "in_place": root is not None,
            "digest": data_digest({rel: digest for rel, _, _, digest in rows}),
            "manifest_sha256": hashlib.sha256(manifest).hexdigest(),
            "source": source, "source_digest": source_digest, "conforming": expected.official,
            "counts": counts, "imported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        (tmp / RECORD).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = None
    if home.exists():
        old = home.parent / f".{home.name}{OLD_MARK}{os.getpid()}-{time.time_ns()}"
        os.rename(home, old)
    os.rename(tmp, home)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    tree = load_tree(home)
    assert tree is not None
    return tree
