"""The folder a site is written into: built beside it, swapped in whole, never deleting what
the runner did not write.

``runner leaderboard --html DIR`` may be pointed at any folder: an empty one, one it built
before, or by mistake one that holds the user's own files (``results/archive``, a home
folder). So:

* the site is written into a fresh folder beside DIR (``.DIR.new-XXXX``, same filesystem),
  and only once it is complete is it swapped in: DIR renamed aside, the new folder renamed to
  DIR, the old site removed. A failure on the way (a full disk, a plot that cannot be read)
  removes the half-written folder and leaves DIR as it was;
* the site keeps a manifest of what it wrote, ``DIR/.runner-site.json`` (each file's path
  relative to DIR and its sha256, and each folder). A DIR that holds anything else, or a
  file changed since the runner wrote it, is refused before anything is written, naming
  those files. An empty or missing DIR is fine;
* the old site is removed file by file as its manifest proves the runner wrote it (the same
  digest); anything else found there is left where it is, and said.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runner import safe_read
from runner.errors import UserError
from runner.safe_read import visible

MANIFEST = ".runner-site.json"
SCHEMA_VERSION = 1
NAMED = 5  # foreign files named in a refusal; the rest are counted
WALKED = 100_000  # the most entries of a target folder looked at (a home folder named by mistake)
_HEX = frozenset("0123456789abcdef")


@dataclass
class Contents:
    """What a folder holds, walked without following a link: paths relative to it."""

    files: list[str] = field(default_factory=list)  # regular files
    folders: list[str] = field(default_factory=list)
    others: list[str] = field(default_factory=list)  # links, FIFOs, sockets, devices
    cut: bool = False  # more than ``limit`` entries: the walk stopped there

    @property
    def empty(self) -> bool:
        return not (self.files or self.folders or self.others)


def contents(root: Path, limit: int | None = None) -> Contents:
    found, stack, seen = Contents(), [""], 0
    while stack and not found.cut:
        rel = stack.pop()
        with os.scandir(root / rel if rel else root) as it:
            for item in it:
                seen += 1
                if limit is not None and seen > limit:
                    found.cut = True
                    break
                path = f"{rel}/{item.name}" if rel else item.name
                if item.is_dir(follow_symlinks=False):
                    found.folders.append(path)
                    stack.append(path)
                elif item.is_file(follow_symlinks=False):
                    found.files.append(path)
                else:
                    found.others.append(path)
    found.files.sort()
    found.folders.sort()
    found.others.sort()
    return found


def digest(path: Path) -> str:
    """The sha256 of a regular file, streamed through ``runner.safe_read`` (no FIFO, no link)."""
    h = hashlib.sha256()
    for chunk in safe_read.iter_chunks(path, "data"):
        h.update(chunk)
    return h.hexdigest()


@dataclass
class Manifest:
    """What the runner wrote into a site folder: ``{path: sha256}`` and its folders."""

    files: dict[str, str]
    folders: list[str]

    def as_json(self) -> str:
        return json.dumps({"schema_version": SCHEMA_VERSION, "written_by": "runner leaderboard --html",
                           "files": self.files, "folders": self.folders}, indent=1, sort_keys=True) + "\n"


def _read_manifest(root: Path) -> Manifest | None:
    """The manifest the runner kept in ``root``; None when there is none it can read."""
    try:
        data = safe_read.read_json_object(root / MANIFEST, "json", inside=root)
    except safe_read.Unreadable:
        return None
    files, folders = data.get("files"), data.get("folders")
    if (data.get("schema_version") != SCHEMA_VERSION or not isinstance(files, dict) or not isinstance(folders, list)
            or not all(isinstance(k, str) and isinstance(v, str) and len(v) == 64 and set(v) <= _HEX
                       for k, v in files.items())
            or not all(isinstance(f, str) for f in folders)):
        return None
    return Manifest({k: v for k, v in files.items() if _plain(k)}, [f for f in folders if _plain(f)])


def _plain(rel: str) -> bool:
    """A path the manifest may name: relative, inside the folder, no ``..`` or empty part."""
    parts = rel.split("/")
    return bool(rel) and not rel.startswith("/") and all(p not in ("", ".", "..") for p in parts) and "\0" not in rel


def _named(paths: list[str]) -> str:
    shown = ", ".join(visible(p) for p in paths[:NAMED])
    return shown + (f" and {len(paths) - NAMED} more" if len(paths) > NAMED else "")


def check_target(out: Path) -> Manifest | None:
    """None when ``out`` does not exist; else what the runner wrote there (an empty manifest
    for an empty folder). ``UserError`` naming them when it holds anything the runner did not
    write, or that changed since: nothing is touched then."""
    try:
        mode = os.lstat(out).st_mode
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UserError(f"cannot use {visible(str(out))} for the site ({exc.strerror or exc})",
                        "name a new or empty folder for the site") from None
    if stat.S_ISLNK(mode):
        raise UserError(f"{visible(str(out))} is a link; the site is written only into a folder itself",
                        "name the folder the link leads to, or a new folder")
    if not stat.S_ISDIR(mode):
        raise UserError(f"{visible(str(out))} is a {safe_read.kind_of(mode)}, not a folder",
                        "name a new or empty folder for the site, or a site the runner built")
    try:
        found = contents(out, WALKED)
    except OSError as exc:
        raise UserError(f"cannot list {visible(str(out))} ({exc.strerror or exc})",
                        "name a new or empty folder for the site") from None
    if found.empty:
        return Manifest({}, [])
    kept = _read_manifest(out)
    manifest = kept or Manifest({}, [])
    foreign, changed = list(found.others), []
    for rel in found.files:
        if rel == MANIFEST and kept is not None:
            continue
        if rel not in manifest.files:
            foreign.append(rel)
            continue
        try:
            if digest(out / rel) != manifest.files[rel]:
                changed.append(rel)
        except safe_read.Unreadable:
            foreign.append(rel)
    ours = set(manifest.folders)
    holding = {str(parent) for p in foreign + changed for parent in Path(p).parents}
    foreign += [f"{rel}/" for rel in found.folders if rel not in ours and rel not in holding]
    if foreign or changed or found.cut:
        strange = sorted(foreign) + [f"{p} (changed since the runner wrote it)" for p in sorted(changed)]
        strange = strange or [f"(more than {WALKED} entries)"]
        count = f"over {len(strange)}" if found.cut else f"{len(strange)}"
        raise UserError(
            f"{visible(str(out))} holds {count} file{'s' if len(strange) != 1 else ''} the runner did not "
            f"write: {_named(strange)}; the site was not written and nothing there was touched",
            "name a new or empty folder for the site (or move those files out of it)")
    # What may be removed once the new site is in: only what was found here and is as written.
    return Manifest({rel: manifest.files[rel] for rel in found.files if rel in manifest.files},
                    [rel for rel in found.folders if rel in ours])


def manifest_of(root: Path) -> Manifest:
    """The manifest of a folder the runner has just written (every file's digest)."""
    found = contents(root)
    if found.others:
        raise UserError(f"the site holds {_named(found.others)}, not regular files", None)
    return Manifest({rel: digest(root / rel) for rel in found.files if rel != MANIFEST}, found.folders)


def _mode() -> int:
    """The mode a new folder gets under the umask (mkdtemp makes it 0700)."""
    umask = os.umask(0o22)
    os.umask(umask)
    return 0o777 & ~umask


def mount_of(path: Path) -> Path:
    """The mount point of the filesystem that holds ``path``."""
    path = Path(os.path.abspath(path))
    dev = os.stat(path).st_dev
    while path != path.parent and os.stat(path.parent).st_dev == dev:
        path = path.parent
    return path


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _write_error(exc: OSError, out: Path, fresh: Path | None = None) -> UserError:
    """An OSError while the site was written, in words: a full disk names the disk of ``out``
    (the filesystem actually written), with what is free there."""
    parent = out.parent
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        try:
            mount, vfs = mount_of(parent), os.statvfs(parent)
            where = f"the filesystem mounted at {mount}, {_size(vfs.f_bavail * vfs.f_frsize)} free"
        except OSError:
            where = "its filesystem"
        full = "no space left" if exc.errno == errno.ENOSPC else "the disk quota is exhausted"
        return UserError(f"{full} on the disk that holds {visible(str(out))} ({where}): the site was not written "
                         f"and {visible(str(out))} is as it was",
                         "free space on that disk, or name a folder on another disk with --html")
    what = f"{exc.strerror or exc}"
    if exc.filename and fresh is not None and str(exc.filename).startswith(f"{fresh}/"):
        what += f": {visible(str(exc.filename)[len(str(fresh)) + 1:])}"  # the site's file, not the scratch folder
    return UserError(f"could not write the site into {visible(str(out))} ({what}): "
                     f"{visible(str(out))} is as it was", "check that folder and its disk")


def _remove_old(old: Path, manifest: Manifest) -> bool:
    """Remove the old site from ``old`` (renamed aside): each file its manifest proves the
    runner wrote (same digest), then its folders once empty. True when ``old`` had to stay
    (it holds something the runner cannot prove it wrote)."""
    for rel, sha in manifest.files.items():
        path = old / rel
        if not _plain(rel) or old.resolve() not in path.resolve().parents:
            continue
        try:
            if digest(path) == sha:
                path.unlink()
        except (safe_read.Unreadable, OSError):
            pass
    manifest_file = old / MANIFEST
    if manifest_file.is_file() and not manifest_file.is_symlink():
        manifest_file.unlink(missing_ok=True)
    for rel in sorted(manifest.folders, key=lambda p: p.count("/"), reverse=True):
        if not _plain(rel) or (old / rel).is_symlink() or old.resolve() not in (old / rel).resolve().parents:
            continue
        try:
            (old / rel).rmdir()
        except OSError:
            pass
    try:
        old.rmdir()
        return False
    except OSError:
        return True  # something the runner cannot prove it wrote: left where it is


def build_into(out: Path, write: Callable[[Path], None]) -> None:
    """``write(folder)`` into a fresh folder beside ``out``, swapped in as ``out`` once it is
    complete (``check_target`` first: nothing of the user's is ever removed)."""
    out = Path(os.path.abspath(out))
    if out == out.parent:
        raise UserError(f"{out} is the root folder", "name a new or empty folder for the site")
    previous = check_target(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fresh = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    except OSError as exc:
        raise _write_error(exc, out) from None
    try:
        os.chmod(fresh, _mode() if previous is None else stat.S_IMODE(os.stat(out).st_mode))  # as DIR was
        write(fresh)
        (fresh / MANIFEST).write_text(manifest_of(fresh).as_json(), encoding="utf-8")
        left = _swap(fresh, out, previous)
    except OSError as exc:
        shutil.rmtree(fresh, ignore_errors=True)  # made by mkdtemp above: the runner's own
        raise _write_error(exc, out, fresh) from None
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)  # made by mkdtemp above: the runner's own
        raise
    if left:
        print(f"note: the old site's folder {left} kept files the runner did not write there "
              f"(added while the site was built); they are left there", file=sys.stderr)


def _swap(fresh: Path, out: Path, previous: Manifest | None) -> Path | None:
    """``fresh`` becomes ``out``; the old site, renamed aside first, is removed after. The
    folder of the old site when something not the runner's stayed in it."""
    if previous is None:
        os.rename(fresh, out)  # fails (ENOTEMPTY) rather than replace a folder made meanwhile
        return None
    old = out.parent / f".{out.name}.old-{secrets.token_hex(4)}"
    os.rename(out, old)
    try:
        os.rename(fresh, out)
    except OSError:
        os.rename(old, out)
        raise
    return old if _remove_old(old, previous) else None
