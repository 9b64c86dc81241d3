"""Refuse a result folder whose signature, file digests or statement do not hold."""

from __future__ import annotations

import tempfile
from pathlib import Path

from runner.errors import UserError
from runner.verify import CHECKS
from runner.verify.evidence import Auditor, Evidence, Unavailable

# The integrity checks of `runner verify`: they need no labels, data or trusted keys.
INTEGRITY_CHECKS = ("signature", "file-digests", "statement-matches-result")


def require_signed(folder: Path) -> None:
    checks = dict(CHECKS)
    with tempfile.TemporaryDirectory(prefix="runner-compare-") as scratch:
        evidence = Evidence(Path(folder), Auditor(), Path(scratch))
        for name in INTEGRITY_CHECKS:
            try:
                verdict = checks[name](evidence)
                ok, detail = verdict.ok, verdict.detail
            except (Unavailable, ValueError, KeyError, OSError) as err:
                ok, detail = False, str(err)
            if not ok:
                raise UserError(
                    f"{folder} is not a signed result ({name}: {detail})",
                    "compare only result folders written by `runner reproduce` with a signing key "
                    "(check one with `runner verify FOLDER`)",
                )
