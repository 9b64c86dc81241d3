"""Declared public inputs: the published artifacts an entry may start from (GloVe for SQuAD).

DAWNBench's SQuAD entries start from public word vectors. Shipped in an image they would be
"weights or data it should not carry" (the image inspection), and an entry could pass anything
off as them. So a task declares the artifacts its entries may use (``Task.public_inputs``,
each pinned by the published digest of its archive and of every file kept from it), the user
imports their copy once (``runner data import glove.840B.300d glove.840B.300d.zip``: the
archive, or the files it unpacks to), and each run that declares the input in its manifest
(``public_inputs: [glove.840B.300d]``) gets it mounted read-only at ``/data/public/<name>/``.
The result records what was mounted, file by file (SHA-256); smoke runs get a small synthetic
stand-in in the same format, and say so.

The published digests are SHA-1 (the only ones in use for these files); the import checks
them and records SHA-256 beside them. Each run re-checks sizes and modification times (a
full re-hash is ``runner data check NAME``).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from runner import paths
from runner.errors import UserError
from runner.tasks import PublicInput, Task, public_input

MANIFEST = "public.json"
CHUNK = 1 << 20
PUBLIC_MOUNT = "/data/public"  # where the run's containers see each input, read-only


def root(name: str) -> Path:
    return paths.data_dir() / "public" / name


@dataclass(frozen=True)
class StagedInput:
    """An imported (or synthetic) public input: where it is and what it holds."""

    name: str
    folder: Path
    files: dict[str, dict]  # file -> {"sha256", "sha1", "bytes", "mtime_ns"}
    synthetic: bool = False

    @property
    def mount(self) -> str:
        """Where the run's containers see it (read-only)."""
        return f"{PUBLIC_MOUNT}/{self.name}"

    def record(self) -> dict:
        """``result.json``'s record of this input."""
        return {"name": self.name, "synthetic": self.synthetic,
                "files": {f: {"sha256": v["sha256"], "bytes": v["bytes"]} for f, v in sorted(self.files.items())}}


def _digests(path: Path, progress=None) -> tuple[str, str, int]:
    sha1, sha256, size = hashlib.sha1(), hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            sha1.update(chunk)
            sha256.update(chunk)
            size += len(chunk)
            if progress:
                progress(len(chunk))
    return sha1.hexdigest(), sha256.hexdigest(), size


def _fix(item: PublicInput) -> str:
    return (f"download {item.archive} from {item.url} and run `runner data import {item.name} "
            f"PATH/TO/{item.archive}` (or the folder it unpacks to)")


def import_input(name: str, source: str | Path) -> StagedInput:
    """Stage the user's copy of ``name`` from its official archive or the files it unpacks to.
    Every digest is checked before anything replaces an earlier import."""
    item = public_input(name)
    source = Path(source).expanduser()
    if not source.exists():
        raise UserError(f"no file or folder at {source}", _fix(item))
    target = root(name)
    work = target.with_name(f".{name}.importing-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        if source.is_file() and zipfile.is_zipfile(source):
            sha1, _, _ = _digests(source)
            if sha1 != item.archive_sha1:
                raise UserError(f"{source} is not the official {item.archive}: its SHA-1 is {sha1}, the published "
                                f"one {item.archive_sha1}", _fix(item))
            with zipfile.ZipFile(source) as archive:
                names = set(archive.namelist())
                for wanted, _ in item.files:
                    member = next((n for n in names if n.rsplit("/", 1)[-1] == wanted), None)
                    if member is None:
                        raise UserError(f"{source} holds no {wanted}", _fix(item))
                    with archive.open(member) as src, open(work / wanted, "wb") as dst:
                        shutil.copyfileobj(src, dst, CHUNK)
        else:
            folder = source if source.is_dir() else source.parent
            only = None if source.is_dir() else source.name
            for wanted, _ in item.files:
                if only is not None and wanted != only:
                    continue
                found = folder / wanted
                if not found.is_file():
                    raise UserError(f"{folder} holds no {wanted}", _fix(item))
                shutil.copyfile(found, work / wanted)
        files = {}
        for wanted, pinned in item.files:
            path = work / wanted
            if not path.is_file():
                continue  # one file of a multi-file input given alone
            sha1, sha256, size = _digests(path)
            if sha1 != pinned:
                raise UserError(f"{wanted} is not the official file: its SHA-1 is {sha1}, the published one {pinned}",
                                _fix(item))
            os.chmod(path, 0o444)
            files[wanted] = {"sha1": sha1, "sha256": sha256, "bytes": size, "mtime_ns": path.stat().st_mtime_ns}
        if not files:
            raise UserError(f"{source} holds none of {', '.join(f for f, _ in item.files)}", _fix(item))
        (work / MANIFEST).write_text(json.dumps(
            {"name": name, "files": files, "source": str(source), "digest_source": item.digest_source,
             "imported": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=2, sort_keys=True))
        old = target.with_name(f".{name}.old-{os.getpid()}")
        if target.exists():
            target.rename(old)
        work.rename(target)
        shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return staged_input(name)


def staged_input(name: str) -> StagedInput:
    """The imported input, its files' sizes and times unchanged since the import."""
    item = public_input(name)
    folder = root(name)
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        raise UserError(f"public input {name} is not imported", _fix(item)) from None
    files = data.get("files") or {}
    for file, facts in files.items():
        path = folder / file
        try:
            stat = path.stat()
        except OSError:
            raise UserError(f"public input {name}: {file} is missing from {folder}", _fix(item)) from None
        if stat.st_size != facts["bytes"] or stat.st_mtime_ns != facts["mtime_ns"]:
            raise UserError(f"public input {name}: {file} changed since it was imported (size or time)",
                            _fix(item))
    return StagedInput(name, folder, files)


def check_input(name: str) -> StagedInput:
    """``staged_input`` plus every file re-hashed against the published SHA-1."""
    staged = staged_input(name)
    pins = dict(public_input(name).files)
    for file, facts in staged.files.items():
        sha1, sha256, _ = _digests(staged.folder / file)
        if sha1 != pins.get(file) or sha256 != facts["sha256"]:
            raise UserError(f"public input {name}: {file} no longer matches its digests", _fix(public_input(name)))
    return staged


def for_run(task: Task, declared: list[str], smoke: bool, scratch: Path, words: list[str] | None = None) -> list[StagedInput]:
    """The inputs a run mounts: each the manifest declares, checked (a smoke run: synthetic)."""
    allowed = {i.name for i in task.public_inputs}
    for name in declared:
        if name not in allowed:
            raise UserError(f"task {task.id} declares no public input {name!r}",
                            f"use one of: {', '.join(sorted(allowed)) or 'none (this task has no public inputs)'}")
    if smoke:
        return [synthetic_input(public_input(name), scratch / "smoke-public", words or []) for name in declared]
    return [staged_input(name) for name in declared]


def synthetic_input(item: PublicInput, folder: Path, words: list[str], seed: int = 0) -> StagedInput:
    """A stand-in in the official text format (a word, then its vector), for smoke runs: one
    random vector per word of the synthetic data, the dimension the file's name says."""
    rng = random.Random(f"{item.name}:{seed}")
    target = folder / item.name
    target.mkdir(parents=True, exist_ok=True)
    files = {}
    for file, _ in item.files:
        dims = int(next(part for part in file.split(".") if part.endswith("d") and part[:-1].isdigit())[:-1])
        path = target / file
        with open(path, "w") as fh:
            for word in sorted(set(words)) or ["the"]:
                fh.write(word + " " + " ".join(f"{rng.gauss(0, 0.4):.4f}" for _ in range(dims)) + "\n")
        sha1, sha256, size = _digests(path)
        files[file] = {"sha1": sha1, "sha256": sha256, "bytes": size, "mtime_ns": path.stat().st_mtime_ns}
    return StagedInput(item.name, target, files, synthetic=True)
