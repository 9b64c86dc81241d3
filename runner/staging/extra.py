"""What the readers of a task's second test sets share (``runner/tasks/*/`` modules such as
``mnist/qmnist.py``): how to import a set, its published digests, finding and checking its
files, and what ``staged.json`` says of them. Below both ``runner.tasks`` (whose ``ExtraSet``
each reader gets) and ``runner.data`` (``runner.data.extra_sets`` stages the sets): it imports
neither, and takes any object with an ``ExtraSet``'s fields."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

import numpy as np

from runner.errors import UserError
from runner.staging.checks import Expected, file_digest


class ExtraSetFields(Protocol):
    """The fields of ``runner.tasks.ExtraSet`` these helpers read (read-only: it is frozen)."""

    @property
    def name(self) -> str: ...
    @property
    def files(self) -> tuple[tuple[str, str], ...]: ...
    @property
    def count(self) -> int: ...
    @property
    def url(self) -> str: ...
    @property
    def digest_source(self) -> str: ...


def how_to_import(item: ExtraSetFields) -> str:
    files = " and ".join(name for name, _ in item.files)
    if len(item.files) == 1:
        return f"download {files} ({item.url}) and run `runner data import {item.name} PATH/{files}`"
    return f"download {files} ({item.url}) and run `runner data import {item.name} FOLDER`, FOLDER holding them"

def official(item: ExtraSetFields) -> Expected:
    """The published SHA-256 of every file and the count the set must stage."""
    return Expected(digests={name: ("sha256", digest) for name, digest in item.files}, counts={"eval": item.count})

def find_files(path: Path, item: ExtraSetFields) -> dict[str, Path]:
    """The set's official files: ``path`` is one of them (the others beside it) or the folder
    holding them."""
    path = Path(path).expanduser()
    folder = path if path.is_dir() else path.parent
    if not path.exists():
        raise UserError(f"no file or folder at {path}", how_to_import(item))
    found = {}
    for name, _ in item.files:
        candidate = path if path.is_file() and path.name == name else folder / name
        if not candidate.is_file():
            raise UserError(f"{folder} holds no {name}", how_to_import(item))
        found[name] = candidate
    return found

def check_digests(files: dict[str, Path], expected: Expected, item: ExtraSetFields) -> dict[str, str]:
    """Each file's SHA-256, held to the published one where ``expected`` has it: a wrong
    digest is a one-line refusal naming the file (corrupted, truncated, or not the release)."""
    seen = {}
    for name, path in files.items():
        digest = file_digest(path, "sha256", show=True)
        want = expected.digests.get(name)
        if want is not None and digest != want[1]:
            raise UserError(
                f"{path} is not the official {name}: its sha256 is {digest}, the published one {want[1]} "
                "(a corrupted or incomplete download, or another release?)",
                f"{how_to_import(item)}; `--unofficial` stages other files, marked unofficial")
        seen[name] = digest
    return seen

def source_digest(digests: dict[str, str]) -> str:
    """One digest over the files as found (sha256 of ``<sha256>  <name>`` lines)."""
    lines = "".join(f"{digests[n]}  {n}\n" for n in sorted(digests))
    return "sha256:" + hashlib.sha256(lines.encode()).hexdigest()

def stage_details(item: ExtraSetFields, digests: dict[str, str], expected: Expected, **more) -> dict:
    """What ``staged.json`` says of where the set came from."""
    pinned = all(name in expected.digests for name in digests)
    return {"extra_set": item.name, "files": dict(sorted(digests.items())),
            "digests": (f"the published sha256 ({item.digest_source})" if pinned and expected.official
                        else "recorded at import, not checked against the published ones"), **more}

def check_labels(labels: np.ndarray, classes: int, what: str, item: ExtraSetFields) -> np.ndarray:
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise UserError(f"{what} has labels outside 0..{classes - 1}", how_to_import(item))
    return labels.astype(np.int64)
