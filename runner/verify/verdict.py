"""The one verdict on a run: does it *count*? Computed once, here, and read by every view.

A run **counts** when

1. it *verifies*: every check ``runner verify`` runs passes (the recomputations included)
   under the trusted keys the caller passes in (``runner.keys.trust``), and
2. it is a benchmark result: complete, conforming, not a smoke run, not a study's variant
   of the entry, its cross-seed checks passed (where it carries them), and its engine
   isolated it.

``runner verify``, ``runner ls``, ``runner show``, ``runner leaderboard`` (terminal and
site), ``runner compare`` and the exports all call ``judge`` (or ``judge_report`` over a
report ``verify`` already made): no reader has a verdict of its own.

A verdict costs a full ``verify`` (about a second for an MNIST bundle), so it is cached
under the runner's home by what it depends on and nothing else: the digest of the bundle's
signed statement, the rules versions (the one the run was made under and today's), the
trusted keys and this runner's version. The folder's name is never part of the key. A
cached verdict is used only after the cheap checks (signature, every file's digest, the
signed claim against result.json) pass again on the folder as it is now, so an edit since
the verdict was cached is judged afresh; or, for a folder those checks already passed on,
when its stamp (``folder_stamp``: every entry's size, times and inode, read without opening
a file) is the one it had then, so ``runner ls`` of 100 unchanged runs reads no file's bytes
but the statements'.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runner import __version__, paths
from runner.digests import folder_stamp
from runner.errors import UserError
from runner.results.folder import write_json
from runner.safe_read import Unreadable, check_size, iter_chunks, read_json_object
from runner.results.layout import ENVELOPE, MANIFEST
from runner.verify.report import Report

if TYPE_CHECKING:
    from securesystemslib.signer import SSlibKey

    from runner.verify.evidence import Auditor

# ``runner verify``'s exit codes: the verdict (documented in the README and ``--help``).
EXIT_COUNTS = 0  # verified, and the run counts
EXIT_NOT_VERIFIED = 1  # a check failed
EXIT_DOES_NOT_COUNT = 3  # verified, but incomplete, non-conforming, smoke, a variant, not isolated
# (2 is the CLI's own: a usage error or a problem with what was asked, ``runner.errors``)

COUNTS, VERIFIED_ONLY, NOT_VERIFIED = "counts", "verified, does not count", "not verified"
# The words every view uses, defined once (the terminal's help, the site's footer and index).
WORDS = {
    "verified": "every check of `runner verify` passes under the keys you trust (the signature, every "
                "file's digest, and every figure recomputed from the bundle)",
    "counts": "verified, and a benchmark result: complete, conforming, compared across seeds, not a smoke "
              "run, not a study's variant, isolated by its engine; only runs that count make a reproduced "
              "figure",
    "claims": "claimed figures: DAWNBench's published submissions and entries' own claims",
}
CACHE_DIR = "verdicts"  # under the runner's home
CACHE_FORMAT = 1


@dataclass(frozen=True)
class Verdict:
    """What a run is worth. ``verified``: every check of ``runner verify`` passes under the
    trusted keys; ``counts``: verified and a benchmark result. ``failed`` names the checks
    that fail (with their detail); ``reasons`` says why the run does not count (the failed
    checks first), one line each; empty when it counts."""

    verified: bool
    counts: bool
    failed: tuple[str, ...]
    reasons: tuple[str, ...]
    signer_keyid: str | None  # the trusted key that signed it; None when no trusted key did
    statement_digest: str | None  # sha256 of the signed statement (the cache key); None: unsigned
    notes: tuple[str, ...] = ()  # what a reader must know even when it counts (rules changed since)

    @property
    def word(self) -> str:
        """One vocabulary everywhere: "counts", "verified, does not count", "not verified"."""
        return COUNTS if self.counts else VERIFIED_ONLY if self.verified else NOT_VERIFIED

    @property
    def exit_code(self) -> int:
        return EXIT_COUNTS if self.counts else EXIT_DOES_NOT_COUNT if self.verified else EXIT_NOT_VERIFIED

    @property
    def summary(self) -> str:
        """"counts", or the word and every reason on one line ("not verified: tta: ...; plan: ...")."""
        if self.counts:
            return COUNTS
        return f"{self.word}: " + "; ".join(r.removeprefix("not verified: ") for r in self.reasons)

    @property
    def reason(self) -> str:
        """The first reason, or "counts"."""
        return self.reasons[0] if self.reasons else COUNTS

    def to_dict(self) -> dict:
        return {"verified": self.verified, "counts": self.counts, "verdict": self.word,
                "failed": list(self.failed), "reasons": list(self.reasons), "notes": list(self.notes),
                "signer_keyid": self.signer_keyid, "statement_digest": self.statement_digest}

    @classmethod
    def from_dict(cls, data: dict) -> Verdict:
        return cls(verified=data["verified"] is True, counts=data["counts"] is True,
                   failed=tuple(map(str, data["failed"])), reasons=tuple(map(str, data["reasons"])),
                   signer_keyid=data["signer_keyid"], statement_digest=data["statement_digest"],
                   notes=tuple(map(str, data.get("notes") or ())))


def standing_problems(result: object) -> list[str]:
    """Why a result that verifies is still not a benchmark result, from its own fields (which
    verify has held to the signed claim): one line each, empty when it is one."""
    if not isinstance(result, dict):
        return ["result.json is not an object"]
    problems = []
    isolation = result.get("isolation")  # first: it says what the run is (the host's packages, not the image)
    if isinstance(isolation, dict) and isolation.get("isolated") is not True:
        problems.append(f"its engine could not isolate it: {isolation.get('why_not') or 'not recorded'}")
    if result.get("smoke"):
        problems.append("a smoke run (synthetic data, one short epoch)")
    if result.get("status") != "complete":
        problems.append(f"the run is {result.get('status')}: {result.get('incomplete_reason') or 'no reason given'}")
    if result.get("conforming") is not True:
        reasons = result.get("nonconforming_reasons") or []
        problems.append("non-conforming: " + ("; ".join(map(str, reasons)) if isinstance(reasons, list) and reasons
                                              else "no reason given"))
    from runner.claims import cross_seed_problem, variant_problem  # lazy: start-up (a cached verdict reads no claim)

    training = result.get("training")
    if not result.get("smoke") and isinstance(training, dict):
        if problem := cross_seed_problem(training.get("cross_seed")):
            problems.append(problem)
    if problem := variant_problem(result.get("variant")):
        problems.append(problem)
    return problems


def judge_report(report: Report, statement_digest: str | None = None) -> Verdict:
    """The verdict from a finished ``verify`` report (which holds the bundle's result.json as
    its checks read it, and the trusted key that signed it)."""
    failed = tuple(f"{c.name}: {c.detail}" for c in report.checks if not c.ok and not c.skipped)
    skipped = [c.name for c in report.checks if c.skipped]
    verified = report.ok
    reasons = [f"not verified: {f}" for f in failed]
    if skipped and not failed:
        reasons.append(f"not verified: {len(skipped)} check(s) could not run")
    reasons += standing_problems(report.result)
    notes = tuple(n for n in report.notes if n.startswith("rules"))
    return Verdict(verified, verified and not reasons, failed, tuple(reasons),
                   report.signer_keyid if verified else None, statement_digest, notes)


def judge(path: Path | str, trusted_keys: list[SSlibKey], *, auditor: Auditor | None = None,
          cache: bool = True) -> Verdict:
    """The verdict on the run at ``path`` (a result folder, or a bundle's ``.tar.gz``)."""
    path = Path(path)
    if problems := oversized_files(path):
        # a FIFO, a link or a file over its kind's cap (an 8 GiB sparse events.jsonl) is never
        # digested or copied: the run is not verified, at the cost of a few lstat calls
        return Verdict(False, False, tuple(problems), tuple(f"not verified: {p}" for p in problems), None, None)
    key = _cache_key(path, trusted_keys) if cache else None
    stamp = folder_stamp(path) if key is not None and path.is_dir() else None  # before any check reads it
    if key is not None:
        cached, stamps = _read_cache(key)
        if cached is not None:
            if stamp is not None and stamp in stamps:
                return cached  # this very folder, not changed since it was verified here
            from runner.verify.trust import signature_verdict  # lazy: start-up (the signing libraries)

            if not path.is_dir() or signature_verdict(path, trusted_keys)[0] is None:
                if stamp is not None:
                    _write_cache(key, cached, [stamp, *stamps])
                return cached
            key = None  # edited since signing (or not signed by a trusted key): judged afresh
    from runner.verify.checks import verify_bundle  # lazy: start-up (a cached verdict never loads the verifier)
    from runner.verify.evidence import Auditor  # lazy: start-up (as above)

    report = verify_bundle(path, auditor or Auditor(trusted_keys=list(trusted_keys)))
    verdict = judge_report(report, key and key[1])
    if key is not None and verdict.verified:
        # Only a verified verdict is kept: a failure may come from the auditor's side (data
        # not staged yet), and is cheap to find again.
        _write_cache(key, verdict, [stamp] if stamp is not None else [])
    return verdict


# The files of a run folder that have a kind in runner.safe_read (a cap on their size); each is
# checked by its size alone before any check reads a byte of the folder.
RUN_FILES = (("result.json", "result"), ("events.jsonl", "events"), ("curve.tsv", "text"), ("plan.json", "json"),
             ("fingerprint.json", "json"), (ENVELOPE, "json"), (MANIFEST, "json"))


def oversized_files(path: Path) -> list[str]:
    """Why the run folder ``path`` cannot be verified without reading what no run writes: each
    of its known files that is not a regular file, or is over its kind's cap (one line each,
    the file named relative to the folder); empty for a bundle's .tar.gz or a sound folder."""
    if not path.is_dir():
        return []
    problems = []
    for name, kind in RUN_FILES:
        try:  # checked on its kind and apparent size only (one lstat), never opened
            check_size(path / name, kind)
        except Unreadable as err:
            if err.why != "does not exist":  # a run without it is judged by the checks
                problems.append(f"{name} {err.why}")
    return problems


# -- the cache ---------------------------------------------------------------------------------

def _statement_digest(path: Path) -> str | None:
    """The sha256 of a folder's signed statement, or of a bundle's tarball (its bytes are what
    was signed and packed); None when there is neither."""
    target = path / ENVELOPE if path.is_dir() else path
    if not target.is_file():
        return None
    digest = hashlib.sha256()
    try:
        for chunk in iter_chunks(target, "data"):  # a regular file only: a FIFO never blocks
            digest.update(chunk)
    except UserError:
        return None
    return digest.hexdigest()


def _cache_key(path: Path, trusted_keys: list[SSlibKey]) -> tuple[str, str] | None:
    """(the cache file's name, the statement's digest), or None when nothing may be cached:
    an unsigned folder. Whether a folder's files still match its signature is ``judge``'s
    to check (skipped for a folder whose stamp is one its cached verdict was made on)."""
    digest = _statement_digest(path)
    if digest is None:
        return None
    keys = ",".join(sorted(k.keyid for k in trusted_keys))
    parts = [str(CACHE_FORMAT), digest, keys, __version__, *current_rules()]
    name = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    return name, digest


def current_rules() -> list[str]:
    """Today's rules, task by task (``task:version``): a verdict cached under other rules is
    judged again."""
    from runner.tasks import TASKS  # lazy: start-up (the task table: only when a verdict is cached or read)

    return [f"{task_id}:{getattr(task, 'rules_version', '1')}" for task_id, task in TASKS.items()]


def _cache_path(name: str) -> Path:
    return paths.home() / CACHE_DIR / f"{name}.json"


def _read_cache(key: tuple[str, str]) -> tuple[Verdict | None, list[str]]:
    """(the cached verdict, the stamps of the folders it was checked on), or (None, [])."""
    path = _cache_path(key[0])
    if not path.is_file():
        return None, []
    try:
        data = read_json_object(path, "json")  # runner.safe_read: a FIFO or a huge file is no verdict
        verdict = Verdict.from_dict(data)
    except (UserError, ValueError, KeyError, TypeError, AttributeError):
        return None, []
    stamps = data.get("folder_stamps")
    stamps = [s for s in stamps if isinstance(s, str)] if isinstance(stamps, list) else []
    return (verdict, stamps) if verdict.statement_digest == key[1] else (None, [])


MAX_STAMPS = 8  # the copies of one run (one statement) whose folders a cached verdict remembers


def _write_cache(key: tuple[str, str], verdict: Verdict, stamps: list[str]) -> None:
    target = _cache_path(key[0])
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        write_json(target, {**verdict.to_dict(), "folder_stamps": list(dict.fromkeys(stamps))[:MAX_STAMPS]})
    except OSError:
        pass  # a read-only home: the verdict is recomputed next time, never wrong


def exit_code_of(verdicts: list[Verdict]) -> int:
    """Several bundles: 1 if any is not verified, else 3 if any does not count, else 0."""
    if any(not v.verified for v in verdicts):
        return EXIT_NOT_VERIFIED
    return EXIT_DOES_NOT_COUNT if any(not v.counts for v in verdicts) else EXIT_COUNTS


def require_counts(verdict: Verdict, what: str) -> None:
    """Refuse ``what`` (an export, a comparison) of a run that does not count, in one line."""
    if not verdict.counts:
        raise UserError(f"{what}: the run does not count ({verdict.reason})",
                        "export or compare runs that `runner verify` says count (exit 0)")
