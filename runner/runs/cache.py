"""What ``runner ls`` reads of each run, kept under the runner's home so a listing of 100
unchanged runs opens 100 small files rather than 100 results and the verifier.

An entry is the run's row (``RunRow.to_dict``: result.json's figures and the verdict
``runner verify`` gave), filed under a digest of everything that row depends on, so a change
to any of them is a miss and the row is computed again by ``list_runs`` (the verdict by
``runner.verify.verdict.judge``, never here):

* the folder's stamp (``runner.digests.folder_stamp``: every file's path, size, times
  and inode, read without opening one): result.json, the signed statement, the bundle and
  every file verify reads; any write, copy or replacement changes it;
* the trusted keys' sources: the bytes of every public key file ``trusted_keys`` may read
  (``--trusted-keys``, or the trust store, your key's folder and the variables naming keys);
* what the auditor recomputes with: the staged data's folders (two levels, by their stamps);
* this runner: its version and the stamps of its own verify and task modules.

The cache is untrusted input like any file: an entry that does not parse, or does not name
the very key it is filed under, is a miss. It stores only what was derived from the files
its key covers, so it can say nothing the files and the verifier would not say again.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from runner import __version__, paths

CACHE_DIR = "listing"  # under the runner's home
CACHE_FORMAT = 1
ENTRY_LIMIT = 64 << 10  # a row is a few KiB; a larger file is no row of ours
PUBLIC_SUFFIX = ".pub.json"  # runner.keys.PUBLIC_SUFFIX (not imported: it loads the signing libraries)
KEY_VARIABLES = ("RUNNER_SIGNING_KEY", "RUNNER_SIGNING_PUBKEY")  # the variables naming your keys
CODE = Path(__file__).resolve().parent.parent  # the runner package
CODE_FOLDERS = ("verify", "tasks", "runs", "results", "bundle")  # whose code decides a row


def _stat_line(path: Path) -> str:
    try:
        st = path.lstat()
    except OSError as err:
        return f"{path}\0gone {err.errno}"
    return f"{path}\0{st.st_mode} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino}"


def _shallow_stamp(folder: Path, depth: int) -> list[str]:
    """Stat lines of ``folder`` and what lies under it, ``depth`` levels down."""
    lines = [_stat_line(folder)]
    if depth and folder.is_dir():
        try:
            children = sorted(folder.iterdir())
        except OSError as err:
            return [*lines, f"{folder}\0unreadable {err.errno}"]
        for child in children:
            lines += _shallow_stamp(child, depth - 1) if child.is_dir() else [_stat_line(child)]
    return lines


def _file_bytes(path: Path) -> str:
    """``path`` and the sha256 of its bytes (a key file is small; a large one is named by its stat)."""
    try:
        if path.is_file() and path.stat().st_size <= ENTRY_LIMIT:
            return f"{path}\0{hashlib.sha256(path.read_bytes()).hexdigest()}"
    except OSError as err:
        return f"{path}\0unreadable {err.errno}"
    return _stat_line(path)


def trust_sources(option: str | Path | None) -> list[str]:
    """Every public key file ``runner.keys.trust.trusted_keys(option)`` may read, by its bytes
    (more than it reads is only a miss more, never a stale row)."""
    if option:
        where = Path(option).expanduser()
        files = sorted(where.glob("*" + PUBLIC_SUFFIX)) if where.is_dir() else [where]
    else:
        files = [f for folder in (paths.trusted_keys_dir(), paths.keys_dir()) if folder.is_dir()
                 for f in sorted(folder.glob("*" + PUBLIC_SUFFIX))]
        for variable in KEY_VARIABLES:
            value = os.environ.get(variable, "")
            named = Path(value.partition(":")[2] if value.startswith("file2:") else value).expanduser()
            if value and named.parent.is_dir():
                files += sorted(named.parent.glob("*" + PUBLIC_SUFFIX)) + [named]
    # your key's folder by its stamps too: a private key replaced beside its public half is another trust
    folder = [] if option else _shallow_stamp(paths.keys_dir(), 1)
    return [f"{name}={os.environ.get(name, '')}" for name in KEY_VARIABLES] + [_file_bytes(f) for f in files] + folder


def context_digest(option: str | Path | None) -> str:
    """The part of every key that is the same for every run of one listing: the trusted keys'
    sources, the staged data, this runner's code."""
    code = [line for name in CODE_FOLDERS for line in _shallow_stamp(CODE / name, 1)]
    parts = [str(CACHE_FORMAT), __version__, *trust_sources(option), *_shallow_stamp(paths.data_dir(), 2), *code]
    return hashlib.sha256("\n".join(parts).encode(errors="surrogateescape")).hexdigest()


def row_key(folder: Path, context: str, stamp: str) -> str:
    """The key of one run folder's row: ``FOLDER-STATE``, a digest of the listing's context and
    the folder's path, then one of those and the folder's stamp (a folder keeps one row: the
    row of its state before is removed when its new one is kept)."""
    where = hashlib.sha256(f"{context}\n{os.path.abspath(folder)}".encode(errors="surrogateescape")).hexdigest()
    state = hashlib.sha256(f"{where}\n{stamp}".encode()).hexdigest()
    return f"{where[:24]}-{state}"


def _path(key: str) -> Path:
    return paths.home() / CACHE_DIR / key[:2] / f"{key}.json"


def read_row(key: str) -> dict | None:
    """The row filed under ``key``, or None (none, unreadable, too large, or filed under another key)."""
    path = _path(key)
    try:
        if not path.is_file() or path.stat().st_size > ENTRY_LIMIT:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key or not isinstance(data.get("row"), dict):
        return None
    return data["row"]


def write_row(key: str, row: dict) -> None:
    """File ``row`` under ``key`` (written whole, then renamed: a reader never sees half of it)."""
    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        part = path.with_name(f".{path.name}.{os.getpid()}")
        part.write_text(json.dumps({"key": key, "row": row}), encoding="utf-8")
        os.replace(part, path)
        for before in path.parent.glob(key.partition("-")[0] + "-*.json"):  # the folder's rows of other states
            if before != path:
                before.unlink(missing_ok=True)
    except OSError:
        pass  # a read-only home: the row is computed again next time, never wrong
