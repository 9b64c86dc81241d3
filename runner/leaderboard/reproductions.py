"""Reproduced results for the leaderboard: each run's record, whether it counts as a
verified reproduction, and the data its plots need (curve, per-item latencies).

Only a result that is signed by a trusted key with every file intact, complete,
conforming, not a smoke run and not a study's variant of the entry (switches off, another
placement) counts; any other is shown with the reason it does not.
Archived bundles (``archive/*.tar.gz``) are opened safely and read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from securesystemslib.signer import SSlibKey

from runner.bundle.filelist import MANIFEST
from runner.bundle.open import Limits, UnsafeBundleError, open_bundle
from runner.claims import Comparison, cross_seed_problem, result_claim, variant_problem
from runner.dawnbench.claims import CurvePoint
from runner.dawnbench.tasks import format_task
from runner.dawnbench.tsv import FormatError, read_curve
from runner.errors import UserError
from runner.events import bounded_json
from runner.results.layout import all_runs
from runner.results.view import ResultRecord, read_record
from runner.verify.trust import signature_verdict

ARCHIVE_DIR = "archive"
FINGERPRINT_FILE = "fingerprint.json"


@dataclass
class Reproduction:
    record: ResultRecord
    origin: str  # the result folder or archive it came from
    signed: bool
    problems: list[str]  # why it is not a verified reproduction; empty when it is
    curve: list[CurvePoint] = field(default_factory=list)
    latencies_ms: dict[str, np.ndarray] = field(default_factory=dict)  # gated backends only
    claim: Comparison | None = None  # the entry's claim this run is compared with (runner.claims.result_claim)
    archive: Path | None = None  # the signed .tar.gz it was read from; None for a result folder
    bundled: bool = False  # the folder holds a bundle (bundle/manifest.json): the site can pack it
    signer_keyid: str | None = None  # the trusted key that signed it; None when not signed by one
    curve_tsv: bytes | None = None  # curve.tsv as the run wrote it (an archive's folder is gone once read)
    fingerprint: dict | None = None  # fingerprint.json (the host it ran on)

    @property
    def verified(self) -> bool:
        return not self.problems

    @property
    def verdict(self) -> str:
        return "verified" if self.verified else self.problems[0]


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes() if path.is_file() and not path.is_symlink() else None
    except OSError:
        return None


def _read_fingerprint(folder: Path) -> dict | None:
    raw = _read_bytes(folder / FINGERPRINT_FILE)
    try:
        data = bounded_json(raw.decode()) if raw is not None else None
    except (UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _problems(record: ResultRecord, signature: str | None) -> list[str]:
    problems = []
    if signature:
        problems.append(signature)
    if record.smoke:
        problems.append("smoke run")
    if not record.complete:
        problems.append(record.status)
    if not record.conforming:
        problems.append("non-conforming")
    if not record.smoke and (problem := cross_seed_problem(record.cross_seed)):
        problems.append(problem)
    if problem := variant_problem(record.variant):
        problems.append(problem)
    return problems


def read_reproduction(folder: Path, trusted_keys: list[SSlibKey], origin: str | None = None,
                      archive: Path | None = None) -> Reproduction:
    record = read_record(folder)
    signature, keyid = signature_verdict(folder, trusted_keys)
    repro = Reproduction(record, origin or str(folder), signature is None, _problems(record, signature),
                         claim=result_claim(folder), archive=archive, bundled=(folder / MANIFEST).is_file(),
                         signer_keyid=keyid, curve_tsv=_read_bytes(record.curve_path()),
                         fingerprint=_read_fingerprint(folder))
    try:
        repro.curve = read_curve(record.curve_path(), (format_task(record.task).metric_field,))
    except FormatError:
        repro.curve = []  # no plot; the figures still come from result.json
    for backend in record.gated_backends():
        try:
            ns = np.load(record.latencies_path(backend.name), allow_pickle=False)
        except (OSError, ValueError):
            continue
        if ns.ndim == 1 and ns.size:
            repro.latencies_ms[backend.name] = np.asarray(ns, dtype=np.float64) / 1e6
    return repro


def _read_archive(path: Path, trusted_keys: list[SSlibKey]) -> Reproduction:
    try:
        with open_bundle(path, Limits()) as opened:
            return read_reproduction(opened.root, trusted_keys, origin=str(path), archive=path)
    except UnsafeBundleError as err:
        raise UserError(f"{path}: not a safe bundle ({err.problem})", "remove it from the archive") from None


def find_result_folders(results: Path) -> list[Path]:
    """``results/<entry>/<run_id>/`` and ``results/<entry>/smoke/<run_id>/`` folders that hold
    a result.json (claims/ and archive/ aside; ``runner.results.layout``)."""
    return sorted(all_runs(results))


def load_reproductions(results: Path, trusted_keys: list[SSlibKey]) -> tuple[list[Reproduction], list[str]]:
    """Every result under ``results``; one that cannot be read is skipped with the reason."""
    out, skipped = [], []
    for folder in find_result_folders(results):
        try:
            out.append(read_reproduction(folder, trusted_keys))
        except UserError as err:
            skipped.append(err.problem)
    for archive in sorted((results / ARCHIVE_DIR).glob("*.tar.gz")):
        try:
            out.append(_read_archive(archive, trusted_keys))
        except UserError as err:
            skipped.append(err.problem)
    return out, skipped
