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

from runner.bundle.open import Limits, UnsafeBundleError, open_bundle
from runner.claims import Comparison, cross_seed_problem, result_claim, variant_problem
from runner.dawnbench.claims import CLAIMS_DIR, CurvePoint
from runner.dawnbench.tasks import format_task
from runner.dawnbench.tsv import FormatError, read_curve
from runner.errors import UserError
from runner.results.record import RESULT_FILE
from runner.results.view import ResultRecord, read_record
from runner.verify.evidence import Auditor, Evidence, Unavailable
from runner.verify import CHECKS

ARCHIVE_DIR = "archive"
# What "signed" means here: the bundle's own integrity, no data or hardware needed.
# verify's checks that say "signed by a trusted key, intact, and the claim is result.json's".
SIGNATURE_CHECKS = [
    (name, check) for name, check in CHECKS
    if name in ("signature", "trusted-key", "payload-type", "file-digests", "statement-matches-result")
]


@dataclass
class Reproduction:
    record: ResultRecord
    origin: str  # the result folder or archive it came from
    signed: bool
    problems: list[str]  # why it is not a verified reproduction; empty when it is
    curve: list[CurvePoint] = field(default_factory=list)
    latencies_ms: dict[str, np.ndarray] = field(default_factory=dict)  # gated backends only
    claim: Comparison | None = None  # the entry's claim this run is compared with (runner.claims.result_claim)

    @property
    def verified(self) -> bool:
        return not self.problems

    @property
    def verdict(self) -> str:
        return "verified" if self.verified else self.problems[0]


def signature_problem(folder: Path, trusted_keys: list[SSlibKey]) -> str | None:
    """None when the bundle is signed by a trusted key and intact, else what fails."""
    evidence = Evidence(folder, Auditor(trusted_keys=trusted_keys), folder)
    for name, check in SIGNATURE_CHECKS:
        try:
            result = check(evidence)
        except Unavailable as err:
            return f"unsigned ({err})"
        except (ValueError, TypeError, KeyError, OSError) as err:
            return f"unsigned ({type(err).__name__}: {err})"
        if not result.ok:
            return f"signature check {name} fails"
    return None


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


def read_reproduction(folder: Path, trusted_keys: list[SSlibKey], origin: str | None = None) -> Reproduction:
    record = read_record(folder)
    signature = signature_problem(folder, trusted_keys)
    repro = Reproduction(record, origin or str(folder), signature is None, _problems(record, signature),
                         claim=result_claim(folder))
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
            return read_reproduction(opened.root, trusted_keys, origin=str(path))
    except UnsafeBundleError as err:
        raise UserError(f"{path}: not a safe bundle ({err.problem})", "remove it from the archive") from None


def find_result_folders(results: Path) -> list[Path]:
    """``results/<entry>/<run_id>/`` folders that hold a result.json (claims/ and archive/ aside)."""
    return sorted(
        p.parent for p in results.glob(f"*/*/{RESULT_FILE}")
        if p.parent.parent.name not in (CLAIMS_DIR, ARCHIVE_DIR)
    )


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
