"""``runner verify``'s checks: check a result bundle offline, one verdict per check.

Checks run in a fixed order (``CHECKS``). Each recomputes what it can from the bundle's
files and the auditor's own keys, labels and profiles, with the same functions
``reproduce`` used; a claimed field that cannot be recomputed is never trusted.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from runner.bundle.open import Limits, UnsafeBundleError, open_bundle
from runner.errors import UserError
from runner.manifest.untrusted_yaml import load_untrusted_yaml
from runner.verify.evidence import Auditor, Evidence, Unavailable
from runner.verify.hardware import check_cost, check_hardware_profile
from runner.verify.inference import check_inference_gate
from runner.verify.ledger import check_across, check_ledger, claim_of
from runner.verify.information import check_information
from runner.verify.initial_weights import check_initial_weights
from runner.verify.model_origin import check_model_origin
from runner.verify.plan import check_plan
from runner.verify.integrity import (
    check_file_digests,
    check_payload_type,
    check_signature,
    check_statement_matches_result,
    check_trusted_key,
)
from runner.verify.report import CheckResult, LedgerClaim, Report, Verdict
from runner.verify.rules import rules_notes
from runner.verify.sbom import check_sbom
from runner.verify.scoring import (
    check_data_digest,
    check_eval_set_complete,
    check_scores,
)
from runner.verify.timing import (
    check_checkpoints,
    check_events_order,
    check_first_crossing,
    check_probe,
    check_tta,
)

SAFE_OPEN = "bundle-safe-to-open"

CHECKS: list[tuple[str, Callable[[Evidence], Verdict]]] = [
    ("signature", check_signature),
    ("trusted-key", check_trusted_key),
    ("payload-type", check_payload_type),
    ("file-digests", check_file_digests),
    ("statement-matches-result", check_statement_matches_result),
    ("ledger", check_ledger),
    ("plan", check_plan),
    ("data-digest", check_data_digest),
    ("eval-set-complete", check_eval_set_complete),
    ("scores", check_scores),
    ("events-order", check_events_order),
    ("tta", check_tta),
    ("first-crossing", check_first_crossing),
    ("checkpoints", check_checkpoints),
    ("probe", check_probe),
    ("model-origin", check_model_origin),
    ("initial-weights", check_initial_weights),
    ("information", check_information),
    ("sbom", check_sbom),
    ("inference-gate", check_inference_gate),
    ("hardware-profile", check_hardware_profile),
    ("cost", check_cost),
]
CHECK_NAMES = [SAFE_OPEN] + [name for name, _ in CHECKS]

__all__ = ["CHECK_NAMES", "Auditor", "CheckResult", "Report", "run_checks", "verify_bundle", "verify_bundles"]


def run_checks(root: Path, auditor: Auditor, scratch: Path) -> list[CheckResult]:
    """Every check after opening, on an already opened (trusted-to-read) folder."""
    return _checked(Evidence(root, auditor, scratch))


def _checked(evidence: Evidence) -> list[CheckResult]:
    return [run_check(name, check, evidence) for name, check in CHECKS]


def _rerun(evidence: Evidence, names: tuple[str, ...]) -> list[CheckResult]:
    """The checks ``names`` again, on ``evidence`` (judged by other rules: runner.verify.rules)."""
    return [run_check(name, check, evidence) for name, check in CHECKS if name in names]


def run_check(name: str, check: Callable[[Evidence], Verdict], evidence: Evidence) -> CheckResult:
    """One check's verdict; whatever the bundle holds, a failure, never an exception."""
    try:
        verdict = check(evidence)
        return CheckResult(name, verdict.ok, verdict.detail)
    except Unavailable as err:
        return CheckResult(name, False, str(err))
    except UserError as err:  # e.g. predictions of the wrong shape for the task
        return CheckResult(name, False, err.problem)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, OSError,
            MemoryError, RecursionError) as err:
        # A hostile bundle can hold anything; a file the check cannot digest fails it
        # (an array header claiming terabytes, JSON nested past the recursion limit).
        return CheckResult(name, False, f"cannot check: {type(err).__name__}: {str(err)[:300]}")


def verify_bundle(
    path: Path | str, auditor: Auditor | None = None, limits: Limits | None = None
) -> Report:
    """Open ``path`` (a ``.tar.gz`` or folder) safely and run every check on it."""
    auditor = auditor or Auditor()
    report = Report(str(path))
    if not Path(path).exists() and not Path(path).is_symlink():
        raise UserError(f"no bundle at {path}", "pass a result folder or a .tar.gz written by runner")
    try:
        opened = open_bundle(path, limits or Limits())
        try:
            _refuse_hostile_yaml(opened)
        except UnsafeBundleError:
            opened.close()
            raise
    except UnsafeBundleError as err:
        report.checks.append(CheckResult(SAFE_OPEN, False, err.problem))
        report.checks += [
            CheckResult(name, False, "not run: the bundle was not opened", skipped=True) for name, _ in CHECKS
        ]
        return report
    with opened, tempfile.TemporaryDirectory(prefix="runner-verify-scratch-") as scratch:
        report.checks.append(CheckResult(SAFE_OPEN, True, f"opened safely into a private folder ({_count(opened.root)} files)"))
        evidence = Evidence(opened.root, auditor, Path(scratch))
        report.checks += _checked(evidence)
        report.notes += result_notes(opened.root)
        report.notes += rules_notes(evidence, report.checks, _rerun)
        if all(report.get(name).ok for name in ("signature", "file-digests", "statement-matches-result")):
            report.ledger_claim = claim_of(evidence, str(path))
            if report.get("trusted-key").ok:
                trusted = {k.keyid for k in evidence.auditor.trusted_keys}
                report.signer_keyid = next((k for k in sorted(evidence.envelope.signatures) if k in trusted), None)
        try:
            report.result = evidence.result
        except (Unavailable, RecursionError, MemoryError):
            report.result = None
    return report


def verify_bundles(bundles: list[Path | str], auditor: Auditor | None = None,
                   limits: Limits | None = None) -> tuple[list[Report], CheckResult | None]:
    """Each bundle's report, and with several bundles (or a published ledger) the check of
    their ledger places together (``runner.verify.ledger``)."""
    auditor = auditor or Auditor()
    reports = [verify_bundle(b, auditor, limits) for b in bundles]
    if len(reports) < 2:
        return reports, None
    claims: list[LedgerClaim] = [r.ledger_claim for r in reports if r.ledger_claim is not None]
    return reports, check_across(claims, len(reports))


def _refuse_hostile_yaml(opened) -> None:
    """The bundle's YAML (its hardware profile) is read by the checks with a plain safe
    loader: refuse, before any check, a file an alias bomb or sheer size makes dangerous."""
    for path in sorted(opened.root.rglob("*.yaml")):
        try:
            load_untrusted_yaml(path, path.name)
        except UserError as err:
            raise UnsafeBundleError(f"unsafe bundle {opened.source}: {err.problem}",
                                    "do not trust this bundle; ask its publisher for a clean one") from None


def result_notes(root: Path) -> list[str]:
    """What the result says about itself that a reader must see beside the checks: its place
    in its key's ledger. (Why a run does not count, smoke, a variant, non-conforming,
    incomplete, is the verdict's: ``runner.verify.verdict``.)"""
    evidence = Evidence(root, Auditor(), root)
    try:
        result = evidence.result
    except (Unavailable, RecursionError, MemoryError):  # a hostile result.json: the checks say so
        return []
    if not isinstance(result, dict):
        return []
    notes: list[str] = []
    place = result.get("ledger")
    if not isinstance(place, dict):
        return notes
    runs = place.get("entry_runs")
    if isinstance(runs, int) and not isinstance(runs, bool) and runs > 1:
        notes.append(f"run {runs} of this entry with its key (ledger index {place.get('index')}): the key made "
                     f"{runs - 1} other(s) before it; ask for them, or for the key's ledger (--ledger)")
    return notes


def _count(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file())
