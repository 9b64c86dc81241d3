"""Custody of a signed result: nothing writes into it or signs it again after an edit.

``runner reinfer`` rewrites a result's inference and signs the folder again, and ``runner
bundle sign`` signs a folder as it finds it. Either would put the signer's key on whatever
was edited since the last signature: a plan naming other data and limits, a checkpoint's
bytes, a TTA. So both first hold the folder to its own bundle with ``verify``'s own checks
(``CUSTODY``: the signature under the bundled key, every file's digest, the signed claim
against result.json, the plan against the result) and refuse it, naming what changed. A
signed folder must also be signed by the key that would sign it again: re-signing another
signer's result would vouch for training this key never saw. ``runner audit --replay``
runs every check of ``verify`` before it replays (``runner.verify.verify_bundle``).

A bundle can be deleted, so the bundle is not the last word: a signature is then given only
to a folder whose files match the runner's own record of what it measured, kept outside the
folder (``runner.bundle.measured.require_measured``, called by ``runner.bundle.sign_again``).
No refusal here advises signing again: a changed folder is started again from its bundle or
reproduced.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from runner.bundle.filelist import ENVELOPE, MANIFEST
from runner.errors import UserError
from runner.keys import load_signer
from runner.verify.checks import run_check
from runner.verify.evidence import Auditor, Evidence, Unavailable
from runner.verify.integrity import check_file_digests, check_signature, check_statement_matches_result
from runner.verify.plan import check_plan

SIGNED = (("signature", check_signature), ("file-digests", check_file_digests),
          ("statement-matches-result", check_statement_matches_result), ("plan", check_plan))
UNSIGNED = (("file-digests", check_file_digests), ("plan", check_plan))


def require_intact(folder: Path, action: str, *, unbundled_ok: bool = False) -> None:
    """Refuse ``action`` on ``folder`` unless it is what its bundle says: every file as signed
    (as the unsigned manifest lists it, for a folder bundled without a key), and signed by this
    runner's own key. A folder never bundled passes only when ``unbundled_ok``."""
    folder = Path(folder)
    signed = (folder / ENVELOPE).is_file()
    if not signed and not (folder / MANIFEST).is_file():
        if unbundled_ok:
            return
        raise UserError(f"{folder} has no bundle ({MANIFEST}) to check its files against; {action} refused",
                        "start again from the signed bundle, or `runner reproduce` the entry again")
    with tempfile.TemporaryDirectory(prefix="runner-custody-") as scratch:
        evidence = Evidence(folder, Auditor(), Path(scratch))
        failed = [c for c in (run_check(name, check, evidence) for name, check in (SIGNED if signed else UNSIGNED))
                  if not c.ok]
        if failed:
            raise UserError(f"{folder} is not what was signed ({'; '.join(f'{c.name}: {c.detail}' for c in failed)}); "
                            f"{action} refused",
                            "start again from the signed bundle (or `runner reproduce` the entry again)")
        if signed:
            _require_own_key(folder, evidence, action)


def _require_own_key(folder: Path, evidence: Evidence, action: str) -> None:
    signer = load_signer()
    try:
        theirs = evidence.signer_key.keyid
    except Unavailable as err:
        raise UserError(f"{folder}: {err}; {action} refused", "start again from the signed bundle") from None
    if signer is not None and signer.public_key.keyid != theirs:
        raise UserError(f"{folder} is signed by key {theirs[:16]}, not by this runner's key "
                        f"{signer.public_key.keyid[:16]}: {action} would put your key on a result you did not run",
                        "re-run the entry here (`runner reproduce`), or use the key that signed it")
