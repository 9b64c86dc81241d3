"""``runner verify``: check a result bundle offline, one verdict per check.

The checks and their order are in ``runner.verify.checks``; the one verdict every view reads
is ``runner.verify.verdict``. The names below load on first use (PEP 562): a view that finds
its verdicts cached (``runner ls``) imports ``runner.verify.verdict`` without loading the
verifier, its recomputations and their libraries."""

from __future__ import annotations

from typing import TYPE_CHECKING

from runner.lazy import exports

_WHERE: dict[str, str | tuple[str, str]] = {
    **dict.fromkeys(("CHECKS", "CHECK_NAMES", "SAFE_OPEN", "result_notes", "run_check", "run_checks",
                     "verify_bundle", "verify_bundles"), "runner.verify.checks"),
    **dict.fromkeys(("Auditor", "Evidence", "Unavailable"), "runner.verify.evidence"),
    **dict.fromkeys(("CheckResult", "Report"), "runner.verify.report"),
}

__all__ = sorted(_WHERE)


# The same names as a type checker reads them (``X as X``: re-exported).
if TYPE_CHECKING:
    from runner.verify.checks import (
        CHECK_NAMES as CHECK_NAMES, CHECKS as CHECKS, result_notes as result_notes, run_check as run_check,
        run_checks as run_checks, SAFE_OPEN as SAFE_OPEN, verify_bundle as verify_bundle,
        verify_bundles as verify_bundles,
    )
    from runner.verify.evidence import Auditor as Auditor, Evidence as Evidence, Unavailable as Unavailable
    from runner.verify.report import CheckResult as CheckResult, Report as Report

__getattr__ = exports(__name__, _WHERE)
