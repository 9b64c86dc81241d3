"""Drift: rebuild the entry behind an archived bundle and say what changed since.

An archived result claims an image built from certain manifest, Dockerfile and lock
digests on a certain base, with a certain SBOM. Rebuilding the entry today (hermetically,
from the same recipe) shows what moved: the entry's own files, the base image (Debian
packages are resolved when the base is bootstrapped), or the packages inside the image.
With ``rerun``, the entry is also reproduced and its TTA compared with the archived one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from runner import paths
from runner.build import build_entry
from runner.bundle import open_bundle
from runner.engine import get_client
from runner.errors import UserError
from runner.manifest import load_entry


@dataclass
class Drift:
    bundle: str
    entry: str
    changes: list[str] = field(default_factory=list)
    tta_archived: float | None = None
    tta_now: float | None = None

    @property
    def drifted(self) -> bool:
        return bool(self.changes)


def _packages(sbom: dict, kind: str) -> dict[str, str]:
    return {p["name"].lower(): p["version"] for p in sbom.get(kind, [])}


def sbom_changes(before: dict, after: dict) -> list[str]:
    """Every package added, removed or changed in version, per kind (python, debian)."""
    changes = []
    for kind in ("python", "debian"):
        old, new = _packages(before, kind), _packages(after, kind)
        for name in sorted(old.keys() | new.keys()):
            if name not in new:
                changes.append(f"{kind} package {name} {old[name]} removed")
            elif name not in old:
                changes.append(f"{kind} package {name} {new[name]} added")
            elif old[name] != new[name]:
                changes.append(f"{kind} package {name} {old[name]} -> {new[name]}")
    return changes


def check_drift(bundle: Path, entry_path: Path | None, console: Console, rerun: bool = False,
                tolerance: float = 0.25, slurm=None) -> Drift:
    """``slurm``: a ``runner.slurm.SlurmOptions`` to rerun as a Slurm job rather than here."""
    with open_bundle(bundle) as opened:
        result = json.loads((opened.root / "result.json").read_text())
        sbom = json.loads((opened.root / "sbom.json").read_text())
    name = result["entry"]["name"]
    entry = load_entry(entry_path or paths.repo_root() / "entries" / name)
    if entry.name != name:
        raise UserError(f"{bundle} is a result of {name}, not {entry.name}",
                        f"pass --entry with the folder of {name}")
    drift = Drift(str(bundle), name)
    for what, digest in entry.digests().items():
        if result["entry"]["digests"].get(what) != digest:
            drift.changes.append(f"the entry's {what} changed since the archived run")
    client = get_client()
    built = build_entry(entry.for_smoke() if result.get("smoke") else entry, client)
    if built.base.id != result["image"]["base_id"]:
        drift.changes.append(
            f"base image {built.base.tag} is {built.base.id[:19]}, was {result['image']['base_id'][:19]}"
        )
    drift.changes += sbom_changes(sbom, built.sbom)
    if rerun:
        from runner.reproduce import ReproduceOptions, reproduce

        opts = ReproduceOptions(runs=1, seed=result["seed"], smoke=bool(result.get("smoke")),
                                infer=False)
        if slurm is not None:
            from runner.slurm import reproduce_on_slurm

            (folder,) = reproduce_on_slurm(str(entry.path), opts, slurm, console, resume=False)
        else:
            (folder,) = reproduce(str(entry.path), opts, console)
        now = json.loads((folder / "result.json").read_text())["training"] or {}
        drift.tta_archived = (result.get("training") or {}).get("tta_seconds")
        drift.tta_now = now.get("tta_seconds") if now.get("reached") else None
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
