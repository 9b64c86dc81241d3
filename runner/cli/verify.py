"""``runner verify BUNDLE``: check a result bundle offline, one line per check."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner.keys import load_trusted_keys
from runner.verify import Auditor, verify_bundle


def print_checks(console: Console, checks) -> None:
    """One line per check: a mark, the name, the detail (verify's and audit's format)."""
    width = max(len(c.name) for c in checks)
    for check in checks:
        mark = "[dim]-[/]" if getattr(check, "skipped", False) else ("[green]✓[/]" if check.ok else "[red]✗[/]")
        console.print(f"{mark} {check.name:<{width}}  {escape(check.detail)}")


def run(args) -> int:
    trusted = load_trusted_keys(Path(args.trusted_keys) if args.trusted_keys else None)
    report = verify_bundle(Path(args.bundle), Auditor(trusted_keys=trusted))
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return 0 if report.ok else 1
    console = Console(highlight=False)
    print_checks(console, report.checks)
    for note in report.notes:
        console.print(f"[yellow]note[/]: {escape(note)}")
    if report.ok:
        console.print(f"[green bold]verified[/]: all {len(report.checks)} checks pass")
    else:
        console.print(f"[red bold]NOT verified[/]: {len(report.failed)} of {len(report.checks)} checks fail "
                      f"({', '.join(report.failed)})")
    return 0 if report.ok else 1
