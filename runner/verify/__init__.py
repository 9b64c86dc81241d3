"""``runner verify``: check a result bundle offline, one verdict per check.

The checks and their order are in ``runner.verify.checks``; the one verdict every view reads
is ``runner.verify.verdict``. The names below load on first use (PEP 562): a view that finds
its verdicts cached (``runner ls``) imports ``runner.verify.verdict`` without loading the
verifier, its recomputations and their libraries."""

from __future__ import annotations

from runner.lazy import exports

_WHERE = {
    **dict.fromkeys(("CHECKS", "CHECK_NAMES", "SAFE_OPEN", "result_notes", "run_check", "run_checks",
                     "verify_bundle", "verify_bundles"), "runner.verify.checks"),
    **dict.fromkeys(("Auditor", "Evidence", "Unavailable"), "runner.verify.evidence"),
    **dict.fromkeys(("CheckResult", "Report"), "runner.verify.report"),
}

__all__ = sorted(_WHERE)


__getattr__ = exports(__name__, _WHERE)
