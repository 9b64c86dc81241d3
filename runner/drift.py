"""Drift: rebuild the entry behind an archived bundle and say what changed since.

An archived result claims an image built from certain manifest, Dockerfile and lock
digests on a certain base, with a certain SBOM. Rebuilding the entry today (hermetically,
from the same recipe) shows what moved: the entry's own files (its manifest, Dockerfile
and lock by the digests the result names; its code against the copies in the bundle), the
base image (Debian packages are resolved when the base is bootstrapped), or the packages
inside the image.
With ``rerun``, the entry is also reproduced and its TTA compared with the archived one.

The base image is compared by what it holds, never by its id: ``docker import`` writes its
own time into the image config, so every machine that bootstraps the base gets a new id
for the same files. What is compared, best first:

1. the base's layer digests (diff ids: the sha256 of each layer's tar), which the
   reproducible bootstrap makes equal for equal contents;
2. else a digest over every file's path, size and sha256 (equal when only tar metadata
   differs); two bases bootstrapped by different tools (mmdebstrap, debootstrap) from the
   same Debian Release differ in dpkg's own records only, and are compared by 3;
3. and always the package lists (Debian and Python, with versions), which name what moved.

Bundles made before the SBOM carried the base's digests (``sbom["base"]``) are compared by
their package lists only, and the report says so.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from collections.abc import Callable
from pathlib import Path


from runner import paths
from runner.entry_build import build_entry
from runner.bundle import open_bundle
from runner.digests import sha256_file
from runner.engine import get_engine
from runner.errors import UserError
from runner.manifest import load_entry
from runner.results.record import Result
from runner.entry_build.context import entry_files
from runner.manifest.untrusted_yaml import load_untrusted_yaml


@dataclass
class Drift:
    bundle: str
    entry: str
    changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # how it was compared; not drift
    tta_archived: float | None = None
    tta_now: float | None = None

    @property
    def drifted(self) -> bool:
        return bool(self.changes)


def _packages(sbom: dict, kind: str) -> dict[str, str]:
    return {p["name"].lower(): p["version"] for p in sbom.get(kind, [])}


def _moved(old: dict[str, str], new: dict[str, str]):
    """(name, "removed" | "added" | "changed") for every key whose value moved, by name."""
    for name in sorted(old.keys() | new.keys()):
        if name not in new:
            yield name, "removed"
        elif name not in old:
            yield name, "added"
        elif old[name] != new[name]:
            yield name, "changed"


def sbom_changes(before: dict, after: dict) -> list[str]:
    """Every package added, removed or changed in version, per kind (python, debian)."""
    changes = []
    for kind in ("python", "debian"):
        old, new = _packages(before, kind), _packages(after, kind)
        for name, how in _moved(old, new):
            changes.append(f"{kind} package {name} " + {"removed": f"{old.get(name)} removed",
                                                        "added": f"{new.get(name)} added",
                                                        "changed": f"{old.get(name)} -> {new.get(name)}"}[how])
    return changes


def _tool(base: dict) -> str:
    """The name of the tool that bootstrapped a base (its SBOM's ``tool``: "mmdebstrap 1.3.5-7";
    a base that records none was made by debootstrap, the only tool before it was recorded)."""
    return str(base.get("tool") or "debootstrap").split()[0]


def _short(digests: list[str]) -> str:
    return ", ".join(d.replace("sha256:", "")[:12] for d in digests) or "none"


def base_changes(archived: dict, current: dict, archived_tag: str | None = None,
                 current_tag: str | None = None) -> tuple[list[str], list[str]]:
    """(changes, notes) of the base image between two SBOMs, by content (see the module's
    docstring). The package lists themselves are compared by ``sbom_changes``."""
    changes: list[str] = []
    # A recipe's tag is a name, not content (editing a comment moves it): a note only.
    notes = ([f"base image recipe tag {current_tag}, was {archived_tag}"]
             if archived_tag and current_tag and archived_tag != current_tag else [])
    was, now = archived.get("base") or {}, current.get("base") or {}
    if not was.get("layers"):
        return changes, notes + ["the archived bundle records no base layer digests: the base image "
                                 "was compared by its package lists (Debian and Python, with versions)"]
    if not now.get("layers"):
        return changes, notes + ["the rebuilt image's SBOM has no base layer digests: the base image "
                                 "was compared by its package lists"]
    if was["layers"] == now["layers"]:
        return changes, notes + ["base image layers identical (same content digests)"]
    if was.get("files_sha256") and was.get("files_sha256") == now.get("files_sha256"):
        return changes, notes + [f"base image layers differ ({_short(now['layers'])}, were "
                                 f"{_short(was['layers'])}) but every file is the same (path, size, "
                                 f"sha256): only the tar's metadata moved"]
    tools = (_tool(was), _tool(now))
    if tools[0] != tools[1] and was.get("debian_release") == now.get("debian_release"):
        # mmdebstrap and debootstrap install the same packages but keep dpkg's own records
        # differently (status's Priority fields, available, arch, apt's extended_states):
        # the bytes cannot be equal, so the package lists (compared below) decide.
        return changes, notes + [f"base image layers differ ({_short(now['layers'])}, were {_short(was['layers'])}): "
                                 f"bootstrapped by {tools[1]}, the archived one by {tools[0]}, whose dpkg records "
                                 "differ; compared by their package lists (Debian and Python, with versions)"]
    release = ""
    if was.get("debian_release") != now.get("debian_release") and (was.get("debian_release") or now.get("debian_release")):
        release = f"; Debian Release {now.get('debian_release') or 'unknown'}, was {was.get('debian_release') or 'unknown'}"
    changes.append(f"base image content changed: layers {_short(now['layers'])}, were "
                   f"{_short(was['layers'])}{release}")
    return changes, notes


def _archived_manifest(path: Path) -> dict | None:
    """The manifest the archived run was made from (its copy in the bundle), or None."""
    try:
        data = load_untrusted_yaml(path)
    except (UserError, OSError):
        return None
    return data if isinstance(data, dict) else None


def _file_digests(folder: Path, files) -> dict[str, str]:
    """sha256 of each of ``files``, by its path relative to ``folder``."""
    return {f.relative_to(folder).as_posix(): sha256_file(f) for f in files}


def entry_file_changes(archived: dict[str, str], folder: Path, skip: set[str]) -> list[str]:
    """The entry's files (its code: what the image holds besides the packages) that changed,
    were added or removed since the run whose copies are ``archived`` ({path: sha256});
    ``skip``: files compared on their own (manifest, Dockerfile, lock)."""
    now = _file_digests(folder, entry_files(folder))
    moved = [f"{name} {how}" for name, how in _moved(archived, now) if name not in skip]
    return [f"the entry's files changed since the archived run: {', '.join(moved)}"] if moved else []


def _recipe(manifest: dict) -> dict:
    """A manifest without its claim: what decides how the entry is built and run."""
    return {k: v for k, v in manifest.items() if k != "claimed"}


def check_drift(bundle: Path, entry_path: Path | None,
                rerun: Callable[[Path, int, bool], Path] | None = None, tolerance: float = 0.25) -> Drift:
    """What moved since ``bundle`` was made. ``rerun(entry folder, seed, smoke)`` runs the
    entry again and returns its result folder (the CLI passes ``runner reproduce``)."""
    with open_bundle(bundle) as opened:
        try:
            result = Result.read(opened.root)
        except ValueError as err:
            raise UserError(f"{bundle} holds no readable result: {err}", "pass a bundle written by runner") from None
        if result.image is None:
            raise UserError(f"{bundle} is the record of a run that never started (it names no image)",
                            "pass a bundle of a run whose training ran")
        image = result.image
        sbom = json.loads((opened.root / "sbom.json").read_text())
        archived_manifest = _archived_manifest(opened.root / "entry" / "entry.yaml")
        copies = opened.root / "entry"  # the entry's files as the run had them
        archived_files = None
        if copies.is_dir():
            archived_files = _file_digests(copies, [f for f in sorted(copies.rglob("*"))
                                                    if f.is_file() and not f.is_symlink()])
    name = result.entry.name
    entry = load_entry(entry_path or paths.repo_root() / "entries" / name)
    if entry.name != name:
        raise UserError(f"{bundle} is a result of {name}, not {entry.name}",
                        f"pass --entry with the folder of {name}")
    drift = Drift(str(bundle), name)
    for what, digest in entry.digests().items():
        if result.entry.digests.get(what) == digest:
            continue
        if what == "manifest" and archived_manifest is not None and _recipe(archived_manifest) == _recipe(entry.raw):
            drift.notes.append("the entry's manifest changed only in its claim (claimed: a statement about "
                               "runs, not part of the recipe)")
            continue
        drift.changes.append(f"the entry's {what} changed since the archived run")
    if archived_files is None:
        drift.notes.append("the bundle holds no copy of the entry's files: its code was not compared")
    else:
        skip = {p.relative_to(entry.path).as_posix() for p in (entry.manifest_path, entry.dockerfile_path, entry.lock_path)
                if p.is_relative_to(entry.path)}
        drift.changes += entry_file_changes(archived_files, entry.path, skip)
    engine = get_engine()
    built = build_entry(entry.for_smoke() if result.smoke else entry, engine)
    # By content, not by id: an image id embeds the time docker import ran.
    changes, notes = base_changes(sbom, built.sbom, image.base_tag, built.base.tag)
    drift.changes += changes
    drift.notes += notes
    drift.changes += sbom_changes(sbom, built.sbom)
    if rerun is not None:
        folder = rerun(entry.path, result.seed, result.smoke)
        drift.tta_archived = result.tta_seconds
        drift.tta_now = Result.read(folder).tta_seconds
        if drift.tta_now is None and drift.tta_archived is not None:
            drift.changes.append("the rerun did not reach the threshold")
        elif drift.tta_archived and drift.tta_now is not None:
            ratio = drift.tta_now / drift.tta_archived
            if abs(ratio - 1) > tolerance:
                drift.changes.append(
                    f"TTA {drift.tta_now:.2f} s vs archived {drift.tta_archived:.2f} s "
                    f"({ratio - 1:+.0%}, beyond ±{tolerance:.0%})"
                )
    return drift


def archived_bundles() -> list[Path]:
    return sorted((paths.results_dir() / "archive").glob("*.tar.gz"))
