"""The files of a result folder and their sha256: what a bundle's signature covers.

Everything under ``bundle/`` is the bundle's own bookkeeping (manifest, envelope, signer's
public key) and is left out: a file cannot list its own digest, and the envelope signs
the rest. Any other file, in any folder, is covered.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from runner.digests import sha256_file
from runner.errors import UserError

BUNDLE_DIR = "bundle"
MANIFEST = f"{BUNDLE_DIR}/manifest.json"
ENVELOPE = f"{BUNDLE_DIR}/statement.dsse.json"
SIGNER_KEY = f"{BUNDLE_DIR}/signer.pub.json"
BOOKKEEPING = (MANIFEST, ENVELOPE, SIGNER_KEY)
PROFILE_FILE = "profile.yaml"  # the hardware profile the run was matched and priced against



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
    data = json.loads((root / MANIFEST).read_text())
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
