"""What ``verify`` says: one verdict per check, in a fixed order."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Verdict:
    """What one check function says; ``run_checks`` names it from the one table of checks."""

    ok: bool
    detail: str


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    skipped: bool = False  # could not run (an earlier failure left nothing to check); never a pass

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class LedgerClaim:
    """One bundle's signed ledger place, with what identifies its result (read and judged by
    ``runner.verify.ledger``; kept on the bundle's ``Report`` for the checks across bundles)."""

    bundle: str
    key_id: str
    index: int
    previous: str
    entry_runs: int
    entry: str
    smoke: bool
    run_id: str
    result_sha256: str


@dataclass
class Report:
    bundle: str
    checks: list[CheckResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a reader must know even when all pass
    # The bundle's signed ledger place, for the checks across several bundles; None when it
    # has none or its signature does not hold. Not in to_dict.
    ledger_claim: LedgerClaim | None = None
    # result.json as the checks read it inside the opened bundle (None: unreadable), and the
    # trusted key that signed it (None: none did); for the verdict (runner.verify.verdict).
    result: dict | None = None
    signer_keyid: str | None = None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(c.ok for c in self.checks)

    @property
    def failed(self) -> list[str]:
        """Names of the checks that did not pass, in check order (skipped ones included)."""
        return [c.name for c in self.checks if not c.ok]

    @property
    def first_failure(self) -> str | None:
        return next((c.name for c in self.checks if not c.ok and not c.skipped), None)

    def get(self, name: str) -> CheckResult:
        return next(c for c in self.checks if c.name == name)

    def to_dict(self) -> dict:
        return {
            "bundle": self.bundle, "ok": self.ok, "checks": [c.to_dict() for c in self.checks],
            "notes": list(self.notes),
        }
