"""Reproduced results for the leaderboard: each run's record, its verdict (the one
``runner verify`` gives: ``runner.verify.verdict``) and the data its plots need (curve,
per-item latencies).

Only a run that *counts* (it verifies under the trusted keys, every recomputation included,
and is complete, conforming, not a smoke run, not a study's variant) is a reproduction; any
other is shown with the reason it does not count. Archived bundles (``archive/*.tar.gz``)
are opened safely and read the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from securesystemslib.signer import SSlibKey

from runner.bundle.filelist import MANIFEST
from runner.bundle.open import Limits, UnsafeBundleError, open_bundle
from runner.claims import Comparison, result_claim
from runner.dawnbench.claims import CurvePoint
from runner.dawnbench.tasks import format_task
from runner.dawnbench.tsv import FormatError, read_curve
from runner.errors import UserError
from runner.results.layout import all_runs, refuse_linked
from runner.results.view import ResultRecord, read_record
from runner.safe_read import read_bytes, read_json
from runner.verify.verdict import Verdict, judge

ARCHIVE_DIR = "archive"
FINGERPRINT_FILE = "fingerprint.json"


@dataclass
class Reproduction:
    record: ResultRecord
    origin: str  # the result folder or archive it came from
    verdict: Verdict  # runner verify's, read and never judged again here
    curve: list[CurvePoint] = field(default_factory=list)
    latencies_ms: dict[str, np.ndarray] = field(default_factory=dict)  # gated backends only
    claim: Comparison | None = None  # the entry's claim this run is compared with (runner.claims.result_claim)
    archive: Path | None = None  # the signed .tar.gz it was read from; None for a result folder
    bundled: bool = False  # the folder holds a bundle (bundle/manifest.json): the site can pack it
    curve_tsv: bytes | None = None  # curve.tsv as the run wrote it (an archive's folder is gone once read)
    fingerprint: dict | None = None  # fingerprint.json (the host it ran on)

    @property
    def counts(self) -> bool:
        return self.verdict.counts

    @property
    def reason(self) -> str:
        """"counts", or the first reason it does not."""
        return self.verdict.reason

    @property
    def signer_keyid(self) -> str | None:
        return self.verdict.signer_keyid


def _read_bytes(path: Path, kind: str = "text") -> bytes | None:
    """A run's small file (runner.safe_read: a regular file within its kind's cap), or None."""
    try:
        return read_bytes(path, kind) if path.is_file() else None
    except UserError:
        return None


def _read_fingerprint(folder: Path) -> dict | None:
    try:
        data = read_json(folder / FINGERPRINT_FILE) if (folder / FINGERPRINT_FILE).is_file() else None
    except UserError:
        return None
    return data if isinstance(data, dict) else None


def read_reproduction(folder: Path, verdict: Verdict, origin: str | None = None,
                      archive: Path | None = None, record: ResultRecord | None = None) -> Reproduction:
    """The run in ``folder`` (a result folder, or an archive opened into one) with the verdict
    ``runner.verify.verdict.judge`` gave its bundle (``record``: its result, when already read)."""
    record = record or read_record(folder)
    repro = Reproduction(record, origin or str(folder), verdict,
                         claim=result_claim(folder), archive=archive, bundled=(folder / MANIFEST).is_file(),
                         curve_tsv=_read_bytes(record.curve_path()), fingerprint=_read_fingerprint(folder))
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
    verdict = judge(path, trusted_keys)
    try:
        with open_bundle(path, Limits()) as opened:
            return read_reproduction(opened.root, verdict, origin=str(path), archive=path)
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
            refuse_linked(folder)
            record = read_record(folder)  # an unreadable result is skipped before the verifier sees it
            out.append(read_reproduction(folder, judge(folder, trusted_keys), record=record))
        except UserError as err:
            skipped.append(err.problem)
    for archive in sorted((results / ARCHIVE_DIR).glob("*.tar.gz")):
        try:
            out.append(_read_archive(archive, trusted_keys))
        except UserError as err:
            skipped.append(err.problem)
    return out, skipped
