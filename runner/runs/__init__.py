"""The runs under a results folder, as ``runner ls`` lists them and ``runner show`` finds one.

One row per run folder (``runner.results.layout``: real runs and, apart, smoke runs, of
either layout): its short id, status, whether it reached the threshold, its TTA, whether it
is conforming, whether it is a smoke run, and its verdict: the one ``runner verify`` gives
(``runner.verify.verdict``: verified under the trusted keys, every figure recomputed, and
whether it counts). ``find_run`` turns what a user typed (a folder, a run id, its short form,
``ENTRY/SHORT``) into one run folder, or says which runs it could mean.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runner.digests import folder_stamp
from runner.errors import UserError
from runner.results.layout import all_runs, entry_of, entry_runs, refuse_linked, short_id
from runner.results.record import RESULT_FILE
from runner.runs import cache

if TYPE_CHECKING:
    from securesystemslib.signer import SSlibKey

    from runner.results.record import Result
    from runner.verify.verdict import Verdict

# What makes a result.json unreadable as a Result (``Result.read``): never a traceback.
UNREADABLE = (OSError, ValueError, KeyError, TypeError, AttributeError)


@dataclass(frozen=True)
class RunRow:
    folder: Path
    run_id: str
    entry: str
    seed: int | None
    status: str
    reached: bool
    tta_seconds: float | None
    tta_resolution_seconds: float | None
    conforming: bool
    smoke: bool
    verdict: Verdict  # runner verify's (runner.verify.verdict), never judged again here
    variant: dict | None = None  # a study's variant (switches off, another placement); None: the entry's recipe
    ledger: dict | None = None  # result.json's place in its key's ledger (runner.keys.ledger), when signed with one

    @property
    def verified(self) -> bool:
        return self.verdict.verified

    @property
    def counts(self) -> bool:
        return self.verdict.counts

    @property
    def signer_keyid(self) -> str | None:
        """The trusted key that signed it (None: not verified)."""
        return self.verdict.signer_keyid

    @property
    def variant_label(self) -> str:
        """``-one-cycle,large-batch`` (switches off), ``2 nodes x 1 process``, or ""."""
        return variant_label(self.variant)

    @property
    def short_id(self) -> str:
        return short_id(self.run_id)

    @property
    def date(self) -> str:
        """``2026-11-23 01:02`` (UTC) from the run id's stamp; "" for an id without one."""
        stamp = self.run_id[:16]
        if self.short_id == self.run_id:
            return ""
        return f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]} {stamp[9:11]}:{stamp[11:13]}"

    def to_dict(self) -> dict:
        return {
            "run_id": self.run_id, "short_id": self.short_id, "entry": self.entry, "folder": str(self.folder),
            "seed": self.seed, "status": self.status, "reached": self.reached, "tta_seconds": self.tta_seconds,
            "tta_resolution_seconds": self.tta_resolution_seconds, "conforming": self.conforming,
            "smoke": self.smoke, **self.verdict.to_dict(), "variant": self.variant, "ledger": self.ledger,
        }

    @classmethod
    def from_dict(cls, folder: Path, data: dict) -> RunRow:
        """A row ``to_dict`` wrote (the listing's cache), read back for ``folder``; a field of
        the wrong kind is a ValueError (the entry is a miss)."""
        from runner.verify.verdict import Verdict  # lazy: start-up (only the verdict's type, not the verifier)

        def kind(name: str, *types):
            value = data[name]
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                raise ValueError(f"{name}: {type(value).__name__}")
            return value

        number = (int, float, type(None))
        return cls(folder=Path(folder), run_id=kind("run_id", str), entry=kind("entry", str),
                   seed=kind("seed", int, type(None)), status=kind("status", str), reached=kind("reached", bool),
                   tta_seconds=kind("tta_seconds", *number),
                   tta_resolution_seconds=kind("tta_resolution_seconds", *number),
                   conforming=kind("conforming", bool), smoke=kind("smoke", bool),
                   verdict=Verdict.from_dict(data), variant=kind("variant", dict, type(None)),
                   ledger=kind("ledger", dict, type(None)))

    @property
    def ledger_place(self) -> tuple[str, int] | None:
        """(the key whose ledger counts this run, the runs of the entry it had made): its
        signer's, when the run is verified and its ledger place is that key's (an unverified
        place is not believed)."""
        place = self.ledger if isinstance(self.ledger, dict) else {}
        key, runs = place.get("key_id"), place.get("entry_runs")
        if self.verified and isinstance(key, str) and key == self.signer_keyid and isinstance(runs, int):
            return key, runs
        return None

    @property
    def ledger_key(self) -> str | None:
        """The key whose ledger counts this run (``ledger_place``), if any."""
        place = self.ledger_place
        return place[0] if place is not None else None


def variant_label(variant) -> str:
    """A study variant in a few characters: the switches it turned off, its placement."""
    if not variant:
        return ""
    if not isinstance(variant, dict):
        return "?"
    parts = []
    if variant.get("switches_off"):
        parts.append("-" + ",".join(map(str, variant["switches_off"])))
    if "nodes" in variant or "processes_per_node" in variant:
        nodes, processes = variant.get("nodes", "?"), variant.get("processes_per_node", "?")
        parts.append(f"{nodes} node{'' if nodes == 1 else 's'} x {processes} process{'' if processes == 1 else 'es'}")
    return " ".join(parts) or "?"


def row_of(folder: Path, result: Result, verdict: Verdict) -> RunRow:
    """A run's row from its result and the verdict ``runner.verify.verdict.judge`` gave its
    bundle; ``folder`` holds it (a result folder or an opened bundle)."""
    training = result.training
    return RunRow(
        folder=Path(folder), run_id=result.run_id, entry=result.entry.name, seed=result.seed,
        status=result.status, reached=bool(training and training.reached), tta_seconds=result.tta_seconds,
        tta_resolution_seconds=training.tta_resolution_seconds if training and training.reached else None,
        conforming=result.conforming is True, smoke=bool(result.smoke), verdict=verdict,
        variant=result.variant, ledger=result.ledger,
    )


def ledger_counts(rows: list[RunRow]) -> list[tuple[str, bool, int, int]]:
    """For one entry's rows: (key, smoke, runs here, runs the key made) for each key whose
    verified runs carry a ledger place; the runs it made are the largest count its runs
    signed (``entry_runs``), or the key's ledger on this host when it records more
    (``made_here``). "3 of 7 runs of this entry with this key": the 4 others are somewhere,
    failed or kept back."""
    counts: dict[tuple[str, bool], list[int]] = {}
    for row in rows:
        if (place := row.ledger_place) is not None:
            key, entry_runs = place
            counts.setdefault((key, row.smoke), []).append(entry_runs)
    entry = rows[0].entry if rows else ""
    return [(key, smoke, len(runs), max(max(runs), made_here(key, entry, smoke)))
            for (key, smoke), runs in sorted(counts.items())]


def made_here(keyid: str, entry: str, smoke: bool) -> int:
    """The runs of ``entry`` the key's own ledger on this host records (0 when this host keeps
    none for it, or it is broken): a key's owner sees every run, the latest included, even
    those whose folders are elsewhere."""
    from runner.keys.ledger import read_ledger  # lazy: start-up (the signing libraries; only runs with a ledger place)

    try:
        lines = read_ledger(keyid)
    except UserError:
        return 0
    return len({line["run_id"] for line in lines if line["entry"] == entry and line["smoke"] is smoke})


def read_result(folder: Path) -> Result:
    """``folder/result.json``; a missing or malformed one is a UserError naming it."""
    from runner.results.record import Result  # lazy: start-up (a cached row reads no result)

    try:
        return Result.read(folder)
    except UserError:
        raise  # the file and why, already in one line (runner.safe_read)
    except UNREADABLE as err:
        raise UserError(f"{Path(folder) / RESULT_FILE}: not a readable result ({type(err).__name__}: {err})",
                        "pass a run folder written by `runner reproduce`") from None


def judge(path: Path, trusted_keys: list[SSlibKey]) -> Verdict:
    """``runner.verify.verdict.judge``: the one verdict, imported when a run is judged."""
    from runner.verify.verdict import judge as verdict_of  # lazy: start-up (a cached row loads no verifier)

    return verdict_of(path, trusted_keys)


Keys = list["SSlibKey"] | Callable[[], list["SSlibKey"]]


def list_runs(results: Path, entry: str | None, trusted_keys: Keys,
              context: str | None = None) -> tuple[list[RunRow], list[str]]:
    """Every run under ``results`` (or ``entry``'s), entry by entry, real runs before smoke
    runs, oldest first; and the folders that could not be read, with why. ``trusted_keys``:
    the keys, or what reads them (called only when a run is judged); ``context``
    (``runner.runs.cache.context_digest``): rows are read from and kept in the listing's
    cache, each under its folder's stamp; None: every run read and judged now."""
    folders = entry_runs(results, entry) if entry else all_runs(results)
    rows, skipped = [], []
    keys = _once(trusted_keys)
    if not folders:
        keys()  # nothing to judge: the trusted keys are read all the same, so a broken store is said
    for folder in folders:
        try:
            refuse_linked(folder)
            key = cache.row_key(folder, context, folder_stamp(folder)) if context is not None else None
            row = _cached(folder, key)
        except UserError as err:
            skipped.append(err.problem)
            continue
        if row is None:
            judged_with = keys()  # outside the run's own errors: a broken trust store is the command's
            try:
                row = _judged(folder, key, judged_with)
            except UserError as err:
                skipped.append(err.problem)
                continue
        rows.append(row)
    rows.sort(key=lambda r: (r.entry, r.smoke, r.run_id))
    return rows, skipped


def _once(trusted_keys: Keys) -> Callable[[], list[SSlibKey]]:
    """The trusted keys, read on the first call (none when every row is cached)."""
    read: list[list[SSlibKey]] = [trusted_keys] if isinstance(trusted_keys, list) else []

    def keys() -> list[SSlibKey]:
        if not read:
            read.append(trusted_keys() if callable(trusted_keys) else trusted_keys)
        return read[0]
    return keys


def row_at(folder: Path, trusted_keys: Keys, context: str | None) -> RunRow:
    """The row of the run folder ``folder``: from the listing's cache (``context``: see
    ``list_runs``), else read and judged now (and kept there)."""
    key = cache.row_key(folder, context, folder_stamp(folder)) if context is not None else None
    row = _cached(folder, key)
    return row if row is not None else _judged(folder, key, _once(trusted_keys)())


def _judged(folder: Path, key: str | None, trusted_keys: list[SSlibKey]) -> RunRow:
    """The row of ``folder`` read and judged now, and kept under ``key`` (None: not kept)."""
    row = row_of(folder, read_result(folder), judge(folder, trusted_keys))
    if key is not None and row.status != "running":  # a run in progress changes at every look: not kept
        cache.write_row(key, row.to_dict())
    return row


def _cached(folder: Path, key: str | None) -> RunRow | None:
    """The row the listing's cache holds under ``key``, or None (a miss: none, or not a row)."""
    data = cache.read_row(key) if key is not None else None
    if data is None:
        return None
    try:
        return RunRow.from_dict(folder, data)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None


def find_run(ref: str, results: Path) -> Path:
    """The run folder ``ref`` names: a folder holding a result.json, or a run of ``results``
    by its id, its short id (``s5-c0997d``), ``ENTRY/SHORT`` or a unique start of its id."""
    path = Path(ref)
    if path.is_dir():
        if os.path.lexists(path / RESULT_FILE):  # whatever it is: reading it says why it is not a result
            return path
        raise UserError(f"{ref} is a folder without a {RESULT_FILE}",
                        "pass a run folder, a bundle's .tar.gz or a run id that `runner ls` lists")
    entry, _, name = ref.rpartition("/") if "/" in ref else ("", "", ref)
    runs = entry_runs(results, entry) if entry else all_runs(results)
    exact = [r for r in runs if name in (r.name, short_id(r.name))]
    found = exact or [r for r in runs if r.name.startswith(name) or short_id(r.name).startswith(name)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise UserError(f"no run {ref!r} under {results}",
                        "`runner ls` lists the runs (pass a run id, its short form, a folder or a bundle)")
    names = ", ".join(f"{entry_of(r)}/{short_id(r.name)}" for r in found[:8])
    raise UserError(f"{ref!r} could be any of {len(found)} runs ({names}{', ...' if len(found) > 8 else ''})",
                    "pass the full run id or ENTRY/SHORT_ID")
