"""Whether a result counts as signed, without recomputing its figures: the checks of
``verify`` that say "signed by a trusted key, every file intact, and the signed claim is
result.json's" (no data, labels or hardware needed). The leaderboard and ``runner ls`` /
``runner show`` judge a run by them; ``runner verify`` runs every check.

Which keys are trusted is ``runner.keys.trust.trusted_keys``'s: the same set for every command.
"""

from __future__ import annotations

from pathlib import Path

from securesystemslib.signer import SSlibKey

SIGNATURE_CHECKS = ("signature", "trusted-key", "payload-type", "file-digests", "statement-matches-result")


def signature_problem(folder: Path, trusted_keys: list[SSlibKey]) -> str | None:
    """None when the bundle is signed by a trusted key and intact, else what fails."""
    return signature_verdict(folder, trusted_keys)[0]


def signature_verdict(folder: Path, trusted_keys: list[SSlibKey]) -> tuple[str | None, str | None]:
    """(what fails, None), or (None, the id of the trusted key that signed it)."""
    from runner.verify.checks import CHECKS  # lazy: start-up (a cached verdict never loads the verifier)
    from runner.verify.evidence import Auditor, Evidence, Unavailable  # lazy: start-up (as above)

    evidence = Evidence(folder, Auditor(trusted_keys=trusted_keys), folder)
    for name, check in ((n, c) for n, c in CHECKS if n in SIGNATURE_CHECKS):
        try:
            result = check(evidence)
        except Unavailable as err:
            return f"unsigned ({err})", None
        except (ValueError, TypeError, KeyError, OSError) as err:
            return f"unsigned ({type(err).__name__}: {err})", None
        if not result.ok:
            return f"signature check {name} fails", None
    trusted = {k.keyid for k in trusted_keys}
    return None, next((k for k in sorted(evidence.envelope.signatures) if k in trusted), None)
