"""``verify``'s ``sbom`` row: the CycloneDX SBOM (``sbom.cdx.json``) is the one the runner
derives from the bundle's own ``sbom.json``, the entry's lock and the image's record.

Its digest is checked with every other file's (``file-digests``); this row checks what it
says: rebuilt with the function ``reproduce`` wrote it with, it must be equal, so a scanner
reading the CycloneDX file sees exactly the packages the runner read from the image. A bundle
made before the CycloneDX SBOM has none and passes with that said (its ``sbom.json`` is still
covered by the signature).
"""

from __future__ import annotations

from runner.bundle.claim import differences
from runner.digests import sha256_file
from runner.entry_build.cyclonedx import FILE, cyclonedx_document
from runner.entry_build.lockfile import parse_lock
from runner.verify.evidence import Evidence, Unavailable
from runner.verify.report import Verdict

ENTRY_COPY = "entry"  # the entry's files as they were run (runner.reproduce.copy_entry_files)


def _lock(ev: Evidence):
    """The entry's lock among its copied files, found by the digest result.json records;
    None when the bundle holds no such file (the document then carries no hashes)."""
    digest = ev.claim("entry", "digests", "lock")
    folder = ev.root / ENTRY_COPY
    if not isinstance(digest, str) or not folder.is_dir():
        return None
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        if sha256_file(path) == digest:
            return parse_lock(path)
    return None


def _image_text(ev: Evidence, field: str) -> str | None:
    """result.json's ``image.<field>``: a string or nothing; Unavailable for anything else."""
    value = ev.claim("image", field)
    if value is not None and not isinstance(value, str):
        raise Unavailable(f"result.json's image.{field} is not a string: {str(value)[:80]}")
    return value


def check_sbom(ev: Evidence) -> Verdict:
    if not (ev.root / FILE).exists():
        return Verdict(True, f"no {FILE} (a bundle made before the CycloneDX SBOM); sbom.json is covered "
                             "by the file digests")
    found = ev.read_json(FILE)
    sbom = ev.read_json("sbom.json")
    if not isinstance(sbom, dict):
        return Verdict(False, "sbom.json is not an object")
    pins = _lock(ev)
    expected = cyclonedx_document(sbom, pins, _image_text(ev, "id"), _image_text(ev, "tag"),
                                  str(ev.claim("toolkit", "version")))
    if found != expected:
        where = differences(expected, found)
        return Verdict(False, f"{FILE} is not the SBOM of sbom.json and the entry's lock: differs at "
                              + ", ".join(where[:5]) + (f" and {len(where) - 5} more" if len(where) > 5 else ""))
    hashed = sum(1 for c in expected["components"] if c.get("hashes"))
    return Verdict(True, f"CycloneDX {expected['specVersion']}: {len(expected['components'])} components, "
                         f"{hashed} with their sha256 from the lock" + ("" if pins else " (no lock in the bundle)"))
