"""``runner audit BUNDLE --replay``: re-evaluate a bundle's models with Docker."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from rich.console import Console

from runner.cli.verify import print_checks
from runner.errors import UserError
from runner.keys.trust import trusted_keys
from runner.verify.checks import verify_bundle
from runner.verify.evidence import Auditor
from runner.verify.replay import replay
from runner.terminal import json_text


def run(args) -> int:
    if not args.replay:
        raise UserError("runner audit needs --replay (the only audit that needs Docker)",
                        "run `runner audit BUNDLE --replay`, or `runner verify BUNDLE` for the offline checks")
    console = Console(highlight=False)
    # Verify first: a bundle that fails any check is not replayed (its plan, its files).
    report = verify_bundle(Path(args.bundle), Auditor(trusted_keys=trusted_keys(args.trusted_keys)))
    if not report.ok:
        if args.json:
            print(json_text({"bundle": str(args.bundle), "ok": False, "verify": report.to_dict(), "replay": None},
                             indent=2))
        else:
            print_checks(console, [c for c in report.checks if not c.ok])
        raise UserError(f"{args.bundle} fails runner verify ({', '.join(report.failed)}): not replayed",
                        f"run `runner verify {args.bundle}` for every check; replay only a bundle that verifies")
    checks = replay(Path(args.bundle))
    failed = [c.name for c in checks if not c.ok]
    if args.json:
        print(json_text({"bundle": str(args.bundle), "ok": not failed, "verify": report.to_dict(),
                          "replay": [asdict(c) for c in checks]}, indent=2))
        return 1 if failed else 0
    print_checks(console, checks)
    if failed:
        console.print(f"[red bold]NOT replayed[/]: {', '.join(failed)}")
        return 1
    console.print("[green bold]replayed[/]: the bundle's predictions are what its models give")
    return 0
