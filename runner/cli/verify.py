"""``runner verify BUNDLE``: check a result bundle offline, one line per check."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner.keys.trust import trusted_keys
from runner.verify import Auditor, verify_bundles
from runner.verify.ledger import read_published


def print_checks(console: Console, checks) -> None:
    """One line per check: a mark, the name, the detail (verify's and audit's format)."""
    width = max(len(c.name) for c in checks)
    for check in checks:
        mark = "[dim]-[/]" if getattr(check, "skipped", False) else ("[green]✓[/]" if check.ok else "[red]✗[/]")
        console.print(f"{mark} {check.name:<{width}}  {escape(check.detail)}")


def run(args) -> int:
    trusted = trusted_keys(args.trusted_keys)
    ledgers = dict(read_published(Path(path)) for path in args.ledger)
    reports, across = verify_bundles([Path(b) for b in args.bundle], Auditor(trusted_keys=trusted, ledgers=ledgers))
    ok = all(r.ok for r in reports) and (across is None or across.ok)
    if args.json:
        if len(reports) == 1:
            print(json.dumps(reports[0].to_dict(), indent=2))
        else:
            print(json.dumps({"ok": ok, "bundles": [r.to_dict() for r in reports],
                              "across": None if across is None else across.to_dict()}, indent=2))
        return 0 if ok else 1
    console = Console(highlight=False)
    for i, report in enumerate(reports):
        if len(reports) > 1:
            console.print(("\n" if i else "") + f"[bold]{escape(report.bundle)}[/]")
        print_report(console, report)
    if across is not None:
        console.print()
        print_checks(console, [across])
        console.print(f"[green bold]all {len(reports)} bundles verified[/]" if ok else
                      f"[red bold]NOT verified[/]: {sum(not r.ok for r in reports)} of {len(reports)} bundles fail"
                      + ("" if across.ok else ", and their ledger places disagree"))
    return 0 if ok else 1


def print_report(console: Console, report) -> None:
    print_checks(console, report.checks)
    for note in report.notes:
        console.print(f"[yellow]note[/]: {escape(note)}")
    if report.ok:
        console.print(f"[green bold]verified[/]: all {len(report.checks)} checks pass")
    else:
        console.print(f"[red bold]NOT verified[/]: {len(report.failed)} of {len(report.checks)} checks fail "
                      f"({', '.join(report.failed)})")
