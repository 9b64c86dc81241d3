"""``runner verify BUNDLE``: check a result bundle offline, one line per check, and give the
one verdict (``runner.verify.verdict``) as the exit code: 0 the run counts, 1 not verified
(a check failed), 3 verified but it does not count (incomplete, non-conforming, a smoke
run, a study's variant, not isolated); with several bundles, the worst of them."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.text import Text

from runner.keys.trust import trusted_keys
from runner.verify.checks import verify_bundles
from runner.verify.evidence import Auditor
from runner.verify.ledger import read_published
from runner.verify.verdict import EXIT_NOT_VERIFIED, Verdict, exit_code_of, judge_report
from runner.terminal import hanging_text, json_text, whole

DETAIL_INDENT = 4  # a check's detail, past its first line: under the check, not under the names
NAME_COLUMN = 16  # the names are padded to this (most are shorter); a longer one pushes its detail


def print_checks(console: Console, checks) -> None:
    """One line per check: a mark, the name, the detail, which goes on under the check
    indented (a hanging indent: never back to column 0, and the full width, so the 23 checks
    of a run take a screen, not two) (verify's and audit's format)."""
    width = min(max(len(c.name) for c in checks), NAME_COLUMN)
    for check in checks:
        mark = ("-", "dim") if getattr(check, "skipped", False) else ("✓", "green") if check.ok else ("✗", "red")
        lead = Text.assemble(mark, f" {check.name:<{width}}  ")
        console.print(hanging_text(lead, check.detail, console.width, DETAIL_INDENT), soft_wrap=True)


def run(args) -> int:
    trusted = trusted_keys(args.trusted_keys)
    ledgers = dict(read_published(Path(path)) for path in args.ledger)
    reports, across = verify_bundles([Path(b) for b in args.bundle], Auditor(trusted_keys=trusted, ledgers=ledgers))
    verdicts = [judge_report(r) for r in reports]
    code = exit_code_of(verdicts)
    if across is not None and not across.ok:
        code = EXIT_NOT_VERIFIED
    if args.json:
        if len(reports) == 1:
            print(json_text(_json(reports[0], verdicts[0]), indent=2))
        else:
            print(json_text({"ok": code == 0, "verified": all(v.verified for v in verdicts) and code != 1,
                              "counts": code == 0, "bundles": [_json(r, v) for r, v in zip(reports, verdicts)],
                              "across": None if across is None else across.to_dict()}, indent=2))
        return code
    console = Console(highlight=False)
    for i, (report, verdict) in enumerate(zip(reports, verdicts)):
        if len(reports) > 1:
            if i:
                console.print()
            console.print(whole(report.bundle, "bold"), soft_wrap=True)
        print_report(console, report, verdict)
    if across is not None:
        console.print()
        print_checks(console, [across])
        fail = sum(not v.verified for v in verdicts)
        console.print(f"[red bold]NOT verified[/]: {fail} of {len(reports)} bundles fail"
                      + ("" if across.ok else ", and their ledger places disagree") if code == EXIT_NOT_VERIFIED else
                      f"[green bold]all {len(reports)} bundles verified[/]"
                      + ("" if code == 0 else f"; {sum(not v.counts for v in verdicts)} of them do not count"))
    return code


def _json(report, verdict: Verdict) -> dict:
    """A report's checks with the verdict: ``ok`` (every check passes, as before),
    ``verified``, ``counts`` and the reasons it does not count."""
    return {**report.to_dict(), "verified": verdict.verified, "counts": verdict.counts, "verdict": verdict.word,
            "reasons": list(verdict.reasons), "exit_code": verdict.exit_code}


def print_report(console: Console, report, verdict: Verdict) -> None:
    print_checks(console, report.checks)
    for note in report.notes:
        lead = Text.assemble(("note", "yellow"), ": ")
        console.print(hanging_text(lead, note, console.width, DETAIL_INDENT), soft_wrap=True)
    if verdict.counts:
        console.print(f"[green bold]verified[/]: all {len(report.checks)} checks pass; the run [green bold]counts[/]")
    elif verdict.verified:
        console.print(f"[green bold]verified[/]: all {len(report.checks)} checks pass; "
                      "[yellow bold]the run does not count[/]:")
        for reason in verdict.reasons:
            console.print(hanging_text(Text("  - "), reason, console.width, DETAIL_INDENT), soft_wrap=True)
    else:
        lead = Text.assemble(("NOT verified", "red bold"), ": ")
        failed = f"{len(report.failed)} of {len(report.checks)} checks fail ({', '.join(report.failed)})"
        console.print(hanging_text(lead, failed, console.width, DETAIL_INDENT), soft_wrap=True)
