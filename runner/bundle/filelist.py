"""The files of a result folder and their sha256: what a bundle's signature covers.

Everything under ``bundle/`` is the bundle's own bookkeeping (manifest, envelope, signer's
public key) and is left out: a file cannot list its own digest, and the envelope signs
the rest. Any other file, in any folder, is covered.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from runner import safe_read
from runner.bundle.open import Limits
from runner.digests import sha256_file
from runner.entry_outputs import kind_of
from runner.errors import UserError
from runner.manifest.untrusted_yaml import load_untrusted_yaml
from runner.results.layout import BUNDLE_DIR, ENVELOPE, MANIFEST

SIGNER_KEY = f"{BUNDLE_DIR}/signer.pub.json"
BOOKKEEPING = (MANIFEST, ENVELOPE, SIGNER_KEY)
PROFILE_FILE = "profile.yaml"  # the hardware profile the run was matched and priced against
ENTRY_OUTPUT = "output"  # what the entry wrote: the only files a bundle may leave out
# Room kept under verify's limits for the bookkeeping written after the listing (the
# manifest grows by about a hundred bytes per file).
BOOKKEEPING_BYTES = 64 << 20


@dataclass(frozen=True)
class Refused:
    """A file ``runner verify`` would refuse to open, and why (nothing of it was read)."""

    path: str  # relative to the result folder, POSIX
    why: str
    size: int = 0

    @property
    def entry_output(self) -> bool:
        return self.path.startswith(ENTRY_OUTPUT + "/")

    def __str__(self) -> str:
        return f"{self.path} ({self.why})"


def unverifiable(root: Path, limits: Limits | None = None) -> list[Refused]:
    """Every file under ``root`` that ``runner verify`` (``runner.bundle.open``, with the
    same ``Limits``) would refuse: links, special files, hard links, a file over the
    per-file limit, a YAML file its safe loader refuses; then, when the rest is over the
    total or the file count, the entry's largest outputs until it is not (entry output
    only: the runner's own files are never dropped to make room). Types and sizes come
    from ``lstat``: no file is opened but a small ``*.yaml``."""
    limits = limits or Limits()
    refused: list[Refused] = []
    kept: list[tuple[str, int]] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        for item in sorted(os.scandir(folder), key=lambda e: e.name):
            rel = Path(item.path).relative_to(root).as_posix()
            if rel in BOOKKEEPING:
                continue
            st = item.stat(follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(item.path))
            elif not stat.S_ISREG(st.st_mode):
                refused.append(Refused(rel, f"a {kind_of(st.st_mode)}"))
            elif st.st_nlink > 1:
                refused.append(Refused(rel, "hard-linked elsewhere", st.st_size))
            elif st.st_size > limits.max_file_bytes:
                refused.append(Refused(rel, f"{st.st_size} bytes, over the {limits.max_file_bytes}-byte limit "
                                            "of one file", st.st_size))
            elif rel.endswith(".yaml") and (problem := _yaml_problem(Path(item.path))):
                refused.append(Refused(rel, problem, st.st_size))
            else:
                kept.append((rel, st.st_size))
    total, count = sum(size for _, size in kept), len(kept)
    room_files = limits.max_files - len(BOOKKEEPING)
    room_bytes = limits.max_total_bytes - BOOKKEEPING_BYTES
    # Over the total or the count: the entry's outputs go, the largest first.
    for rel, size in sorted((k for k in kept if k[0].startswith(ENTRY_OUTPUT + "/")), key=lambda k: (-k[1], k[0])):
        if total <= room_bytes and count <= room_files:
            break
        total, count = total - size, count - 1
        refused.append(Refused(rel, f"over the bundle's {limits.max_total_bytes}-byte or "
                                    f"{limits.max_files}-file limit", size))
    if total > room_bytes:
        refused.append(Refused(".", f"{total} bytes in all, over the {room_bytes}-byte room under the "
                                    f"{limits.max_total_bytes}-byte limit"))
    if count > room_files:
        refused.append(Refused(".", f"{count} files, over the {room_files} the {limits.max_files}-file "
                                    "limit leaves"))
    return sorted(refused, key=lambda r: r.path)


def _yaml_problem(path: Path) -> str | None:
    """Why verify's loader of untrusted YAML would refuse ``path`` (it reads every *.yaml)."""
    try:
        load_untrusted_yaml(path, path.name)
    except UserError as err:
        return err.problem.replace(str(path), "the file")
    return None


def list_files(root: Path, include_bookkeeping: bool = False) -> list[str]:
    """Every regular file under ``root`` as a sorted POSIX path relative to it.

    A symbolic link or special file is refused: a bundle holds only plain files.
    """
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            full = Path(dirpath) / name
            if full.is_symlink():
                raise UserError(
                    f"{full} is a symbolic link; a bundle holds only plain files",
                    "replace the link with the file it points to",
                )
        for name in filenames:
            full = Path(dirpath) / name
            if not full.is_file():
                raise UserError(f"{full} is not a regular file", "remove it from the result folder")
            rel = full.relative_to(root).as_posix()
            if include_bookkeeping or not rel.startswith(BUNDLE_DIR + "/"):
                found.append(rel)
    return sorted(found)


def file_digests(root: Path) -> dict[str, str]:
    """``{relative path: sha256}`` for every covered file, sorted by path."""
    return {rel: sha256_file(root / rel) for rel in list_files(root)}


def manifest_document(digests: dict[str, str]) -> dict:
    return {
        "version": 1,
        "algorithm": "sha256",
        "files": [{"path": p, "sha256": d, } for p, d in sorted(digests.items())],
    }


def write_manifest(root: Path, digests: dict[str, str]) -> Path:
    path = root / MANIFEST
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(manifest_document(digests), indent=1, sort_keys=True) + "\n")
    return path


def read_manifest(root: Path) -> dict[str, str]:
    """``{path: sha256}`` from ``bundle/manifest.json``; ValueError if malformed."""
    try:
        data = safe_read.read_json(root / MANIFEST, "json")
    except safe_read.Unreadable as err:
        if err.why == "does not exist":
            raise FileNotFoundError(err.problem) from None
        raise ValueError(f"manifest.json {err.why}") from None
    if not isinstance(data, dict) or data.get("algorithm") != "sha256" or not isinstance(data.get("files"), list):
        raise ValueError("manifest.json is not a runner file manifest")
    out: dict[str, str] = {}
    for item in data["files"]:
        if not isinstance(item, dict) or not isinstance(item.get("path"), str) or not isinstance(item.get("sha256"), str):
            raise ValueError(f"malformed manifest entry {item!r}")
        if item["path"] in out:
            raise ValueError(f"manifest lists {item['path']} twice")
        out[item["path"]] = item["sha256"]
    return out
