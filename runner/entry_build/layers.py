"""The image inspection layer by layer: each layer of an image read once, its facts kept by
its content digest (its diff id), so a second entry on the same base and framework layers
parses only its own (issue 50).

Where the engine is Docker with its overlay2 store on this host (``Engine.image_layer_folders``),
each layer is read in place: its folder is the one the daemon's layer database gives for
its diff id (the chain id's record names the diff id and the folder), the layer's bytes are
never exported, and a layer with kept facts is not opened at all. On a fresh machine this
spared the wait for ``docker save``'s first byte (the daemon writes every layer out before
it sends one: 13.7 s for a 1.2 GB image here, page cache dropped) and a second entry's
export and hashing of the shared base and framework layers. The folder is as trusted as the
engine that runs the entry (both are root's on the host, and no container mounts the store);
``parse_folder`` gives the facts the layer's exported tar gives (tested on the same layers).

Otherwise the engine streams the image as ``docker save`` writes it (the layers' tars, the image's
configuration, ``manifest.json``). Every layer's bytes are hashed as they go by: a layer's
kept facts are used only for a layer whose streamed bytes hash to the digest they are kept
under, and the set of streamed layers must be the image's own (its configuration, whose
digest is the image id, names them in order); anything else and the caller falls back to
the merged export. A kept record also carries a digest over its contents and its diff id:
a damaged, edited or misplaced record is a miss, and the layer is parsed again.

Which layers are parsed is decided before their bytes are hashed (a stream cannot be read
twice): a layer whose tar has the size of a kept record of one of the image's layers is only
hashed. The decision is a guess for speed, never for trust: the facts used are those kept
under the hash of the bytes read, and when there are none the pass is run again with that
layer parsed.

The merged view follows the engine's layering: a layer's whiteouts (``.wh.<name>``: the
name and all under it) and opaque folders (``.wh..wh..opq``: everything lower under that
folder) hide what lower layers had, as does any entry that is not a regular file (a folder,
a link) at a lower regular file's path; then the layer's own regular files are added.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import posixpath
import stat
import tarfile
from collections.abc import Callable, Iterator
from typing import IO
from dataclasses import asdict, dataclass, field
from pathlib import Path

from runner import image_cache
from runner.entry_build.eval_copies import Copy
from runner.entry_build.information import FileInformation

LAYER_FORMAT = 1
KIND = "image-audits"
PREFIX = "layer-"
READ_BYTES = 1 << 20
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass(frozen=True)
class FileFacts:
    """One regular file of a layer: what the inspection judges it by."""

    size: int
    sha256: str
    head: bytes
    mtime: int
    source_hash: bytes | None = None  # a .py's, for its .pyc (bytecode.source_hash)


@dataclass
class LayerFacts:
    """What one layer holds and hides, and what was measured or found in it."""

    diff_id: str
    size: int  # of the layer's tar
    files: dict[str, FileFacts] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)  # whiteouts: each path and all under it
    opaque: list[str] = field(default_factory=list)  # folders whose lower content is hidden
    shadows: list[str] = field(default_factory=list)  # entries that are not regular files
    wheel_rows: dict[str, dict[str, list]] = field(default_factory=dict)  # a .whl's RECORD rows
    measured: dict[str, FileInformation] = field(default_factory=dict)  # by measure key
    # per evaluation-set variant: the copies found and the files left packed
    copies: dict[str, tuple[list[Copy], list[str]]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "diff_id": self.diff_id, "size": self.size,
            "files": {p: [f.size, f.sha256, f.head.hex(), f.mtime, f.source_hash.hex() if f.source_hash else None]
                      for p, f in self.files.items()},
            "deleted": self.deleted, "opaque": self.opaque, "shadows": self.shadows,
            "wheel_rows": self.wheel_rows,
            "measured": {k: asdict(m) for k, m in self.measured.items()},
            "copies": {v: [[asdict(c) for c in copies], packed] for v, (copies, packed) in self.copies.items()},
        }

    @classmethod
    def from_dict(cls, data: dict) -> LayerFacts:
        return cls(
            diff_id=str(data["diff_id"]), size=int(data["size"]),
            files={p: FileFacts(int(s), str(d), bytes.fromhex(h), int(m), bytes.fromhex(sh) if sh else None)
                   for p, (s, d, h, m, sh) in data["files"].items()},
            deleted=list(data["deleted"]), opaque=list(data["opaque"]), shadows=list(data["shadows"]),
            wheel_rows={k: dict(v) for k, v in data["wheel_rows"].items()},
            measured={k: FileInformation(**m) for k, m in data["measured"].items()},
            copies={v: ([Copy(**c) for c in copies], list(packed)) for v, (copies, packed) in data["copies"].items()},
        )


def _seal(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def load(diff_id: str) -> LayerFacts | None:
    """The facts kept for ``diff_id``; None when there are none, or when the record is not
    whole and its own (its seal over its contents, its diff id, its format)."""
    data = image_cache.load(KIND, diff_id, prefix=PREFIX)
    if data is None or data.get("format") != LAYER_FORMAT or not isinstance(data.get("layer"), dict):
        return None
    body = data["layer"]
    if body.get("diff_id") != diff_id or data.get("seal") != _seal(body):
        return None
    try:
        return LayerFacts.from_dict(body)
    except (KeyError, TypeError, ValueError):
        return None


def store(facts: LayerFacts) -> None:
    body = facts.to_dict()
    image_cache.store(KIND, facts.diff_id, {"format": LAYER_FORMAT, "layer": body, "seal": _seal(body)},
                      prefix=PREFIX)


class Hashing(io.RawIOBase):
    """A member's bytes, hashed (and counted) as they are read: the place for a progress call."""

    def __init__(self, fh, progress: Callable[[int], None] | None = None):
        self._fh = fh
        self.digest = hashlib.sha256()
        self.read_bytes = 0
        self._progress = progress

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        data = self._fh.read(len(b))
        n = len(data)
        b[:n] = data
        self.digest.update(data)
        self.read_bytes += n
        if self._progress is not None:
            self._progress(n)
        return n

    def drain(self) -> str:
        """Read what is left; the sha256 of all of it, as a diff id."""
        while self.read(READ_BYTES):
            pass
        return "sha256:" + self.digest.hexdigest()


# Called with a layer's regular file: (path, size, mtime, the tar's file object) -> its facts.
ReadFile = Callable[[str, int, int, IO[bytes]], FileFacts]


def parse_layer(stream, size: int, read_file: ReadFile) -> tuple[LayerFacts, str]:
    """A layer tar's facts (its files read by ``read_file``) and its diff id, read once."""
    hashing = Hashing(stream)
    facts = LayerFacts("", size)
    with tarfile.open(fileobj=io.BufferedReader(hashing, buffer_size=READ_BYTES), mode="r|") as tar:
        for member in tar:
            raw = member.name.removeprefix("./").rstrip("/")
            folder, name = posixpath.split(raw)
            path = raw.lstrip("./")  # as the merged export's index names it
            if name == OPAQUE:
                facts.opaque.append(folder.lstrip("./"))
            elif name.startswith(WHITEOUT):
                facts.deleted.append(posixpath.join(folder, name[len(WHITEOUT):]).lstrip("./"))
            elif not member.isreg():
                if path:
                    facts.shadows.append(path)
            else:
                fh = tar.extractfile(member)
                if fh is not None:  # always, for a regular file
                    facts.files[path] = read_file(path, member.size, int(member.mtime), fh)
    facts.diff_id = hashing.drain()
    return facts, facts.diff_id


# Only the attribute a root daemon's overlay2 honours: a build step cannot set a ``trusted.``
# attribute (it lacks CAP_SYS_ADMIN, and overlayfs refuses ``trusted.overlay.*`` through its
# mount), while ``user.overlay.opaque`` is one any step may set and a root overlay2 ignores:
# reading it would hide lower files the container still sees.
OPAQUE_XATTR = "trusted.overlay.opaque"


def parse_folder(folder: Path, diff_id: str, read_file: ReadFile) -> LayerFacts:
    """The facts of a layer read from its folder in the engine's overlay2 store, as
    ``parse_layer`` finds them in the tar the engine exports of it: names in byte order, each
    folder before what it holds; a 0:0 character device is a whiteout, a folder with the
    ``trusted.overlay.opaque`` attribute "y" is opaque (and, as every folder, an entry that
    is not a regular file); a second name of a file (a hard link) is what the tar makes it, a
    link entry; sockets are left out, as the export leaves them. ``size`` is 0: the tar's
    size is not known without writing it."""
    facts = LayerFacts(diff_id, 0)
    seen: set[tuple[int, int]] = set()
    # Depth first with an explicit stack (a layer may nest folders deeper than Python recurses).
    stack: list[tuple[Path, str]] = list(reversed(_children(folder, "")))
    while stack:
        full, path = stack.pop()
        st = os.lstat(full)
        mode = st.st_mode
        if stat.S_ISCHR(mode) and st.st_rdev == 0:
            facts.deleted.append(path)
        elif stat.S_ISDIR(mode):
            facts.shadows.append(path)
            if _opaque(full):
                facts.opaque.append(path)
            stack.extend(reversed(_children(full, path)))
        elif stat.S_ISREG(mode):
            if st.st_nlink > 1 and (st.st_dev, st.st_ino) in seen:
                facts.shadows.append(path)
                continue
            seen.add((st.st_dev, st.st_ino))
            fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb", buffering=0) as fh:
                facts.files[path] = read_file(path, st.st_size, int(st.st_mtime), fh)
        elif not stat.S_ISSOCK(mode):
            facts.shadows.append(path)
    return facts


def _children(folder: Path, rel: str) -> list[tuple[Path, str]]:
    """A folder's entries in byte order of their names: (full path, path in the layer)."""
    out = []
    for name in sorted(os.listdir(os.fsencode(folder))):
        text = os.fsdecode(name)
        out.append((folder / text, f"{rel}/{text}" if rel else text))
    return out


def _opaque(folder: Path) -> bool:
    """Is the folder opaque to the layers below it (``OPAQUE_XATTR`` is "y")?"""
    try:
        return os.getxattr(folder, OPAQUE_XATTR, follow_symlinks=False) == b"y"
    except OSError:
        return False


def hash_layer(stream, progress: Callable[[int], None] | None = None) -> tuple[str, int]:
    """A layer tar's diff id and size, its bytes only hashed (``progress`` told each chunk's size)."""
    hashing = Hashing(stream, progress)
    return hashing.drain(), hashing.read_bytes


def _under(path: str, folder: str) -> bool:
    return folder == "" or path == folder or path.startswith(folder + "/")


def merge(layers: list[LayerFacts]) -> dict[str, tuple[FileFacts, int]]:
    """The merged view of ``layers`` (lowest first): ``{path: (facts, index of its layer)}``."""
    merged: dict[str, tuple[FileFacts, int]] = {}
    for k, layer in enumerate(layers):
        hidden = layer.opaque + layer.deleted
        if hidden:
            merged = {p: v for p, v in merged.items() if not any(_under(p, h) for h in hidden)}
        for path in layer.shadows:
            merged.pop(path, None)
        for path, facts in layer.files.items():
            merged[path] = (facts, k)
    return merged


@dataclass(frozen=True)
class Pass:
    """One read of an image's layers: their facts in order, and what it cost."""

    layers: list[LayerFacts]
    parsed: int  # layers parsed
    parsed_bytes: int
    hashed_bytes: int  # of layers only hashed


def image_members(stream) -> Iterator[tuple[tarfile.TarInfo, IO[bytes] | None]]:
    """The members of a ``docker save`` stream with their file objects, read once."""
    with tarfile.open(fileobj=stream, mode="r|") as tar:
        for member in tar:
            yield member, tar.extractfile(member) if member.isreg() else None
