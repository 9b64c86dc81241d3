"""Where run folders live under the results folder, and the short name a terminal shows.

A real run is ``<results>/<entry>/<run_id>/``; a smoke run (synthetic data, never a figure)
is kept apart, ``<results>/<entry>/smoke/<run_id>/``. Results written before that split keep
their smoke runs beside the real ones and stay readable: every reader lists an entry's runs
through ``entry_runs`` (both places) and tells a smoke run by its result's own ``smoke``.
Beside the entries, ``claims/`` (DAWNBench's submissions), ``archive/`` (signed bundles) and
``.slurm/`` (job files) hold no runs; an entry's ``studies/`` holds links to its runs.

A run id is ``<UTC yyyymmddThhmmssZ>-s<seed>-<6 hex>``; its short form drops the stamp,
``s5-c0997d``: the seed and the random suffix, what tells runs of one entry apart at a glance.
Files and ``--json`` keep the full id.
"""

from __future__ import annotations

from pathlib import Path

from runner.results.record import RESULT_FILE
from runner.safe_read import Unreadable

SMOKE_DIR = "smoke"
STUDIES_DIR = "studies"  # <entry>/studies/<kind>-<UTC stamp>/ (runner.study.common)
STUDY_REPORT_DATA = "report.json"  # in a study's folder: what its report shows (runner.study.report)
# Folders of the results folder that are not entries: claims, the archive, Slurm's job files.
NOT_ENTRIES = frozenset({"claims", "archive", ".slurm"})
# Folders of an entry's folder that are not runs (smoke runs are listed from SMOKE_DIR).
NOT_RUNS = frozenset({SMOKE_DIR, STUDIES_DIR})
# A bundled run's own files (runner.bundle): kept here, where a reader of run folders finds
# them without loading the bundle writer.
BUNDLE_DIR = "bundle"
MANIFEST = f"{BUNDLE_DIR}/manifest.json"
ENVELOPE = f"{BUNDLE_DIR}/statement.dsse.json"


def entry_dir(results: Path, entry: str, smoke: bool) -> Path:
    """The folder a new run of ``entry`` is written to."""
    base = Path(results) / entry
    return base / SMOKE_DIR if smoke else base


def entry_runs(results: Path, entry: str) -> list[Path]:
    """Every run folder of ``entry`` (real and smoke, either layout), oldest first (run ids
    start with their UTC stamp)."""
    base = Path(results) / entry
    found = [p.parent for p in base.glob(f"*/{RESULT_FILE}") if p.parent.name not in NOT_RUNS]
    found += [p.parent for p in (base / SMOKE_DIR).glob(f"*/{RESULT_FILE}")]
    return sorted(found, key=lambda p: (p.name, str(p)))


def entry_studies(results: Path, entry: str) -> list[Path]:
    """Every study folder of ``entry`` (``<results>/<entry>/studies/<kind>-<stamp>/``), oldest
    first; a link is not followed (a study's folder is the runner's own)."""
    base = Path(results) / entry / STUDIES_DIR
    if not base.is_dir() or base.is_symlink():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink())


def entries(results: Path) -> list[str]:
    """The entries with a folder under ``results`` (claims, archive and Slurm's files aside)."""
    root = Path(results)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and p.name not in NOT_ENTRIES)


def all_runs(results: Path) -> list[Path]:
    """Every run folder under ``results``, entry by entry."""
    return [run for entry in entries(results) for run in entry_runs(results, entry)]


def refuse_linked(run_folder: Path) -> None:
    """``Unreadable`` when the run folder, or the entry (or smoke) folder holding it, is a link:
    a listing reads a results folder's runs where they are, never through a link leading
    elsewhere (a downloaded results folder may link a run to any folder of the reader's)."""
    folder = Path(run_folder)
    for part in (folder, folder.parent, folder.parent.parent if folder.parent.name == SMOKE_DIR else None):
        if part is not None and part.is_symlink():
            raise Unreadable(part, "is a link; a listing reads the runs of a results folder only where they are")


def entry_of(run_folder: Path) -> str:
    """The entry a run folder belongs to (its parent, or its grandparent for a smoke run)."""
    parent = Path(run_folder).parent
    return parent.parent.name if parent.name == SMOKE_DIR else parent.name


def short_id(run_id: str) -> str:
    """``20261123T010203Z-s5-c0997d`` -> ``s5-c0997d``; an id of another form stays whole."""
    stamp, _, rest = run_id.partition("-")
    if len(stamp) == 16 and stamp.endswith("Z") and stamp[8] == "T" and rest.startswith("s"):
        return rest
    return run_id
