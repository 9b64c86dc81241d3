"""What ``runner verify`` says about the rules a result was judged by (``runner.tasks.rules``).

The checks judge a result by the version of its task's rules it records (``Evidence.rules``;
none recorded: version 1). When today's rules are another version, the checks that compare
with a threshold or a limit are run a second time under today's, and a note says what they
would say: the verdict stays the recorded version's.
"""

from __future__ import annotations

from collections.abc import Callable

from runner.verify.evidence import Evidence, Unavailable
from runner.verify.report import CheckResult

# The checks that compare the result with its task's threshold or limits.
LIMIT_CHECKS = ("scores", "tta", "first-crossing", "probe", "model-origin", "initial-weights", "information", "cost")
DETAIL_CHARS = 160  # of a check's first finding under today's rules


def _first(detail: str) -> str:
    """A check's first finding (its detail lists them with "; "), cut to a note's width."""
    first = detail.split("; ")[0]
    return first if len(first) <= DETAIL_CHARS else first[:DETAIL_CHARS - 3] + "..."


def rules_notes(evidence: Evidence, checks: list[CheckResult],
                rerun: Callable[[Evidence, tuple[str, ...]], list[CheckResult]]) -> list[str]:
    """The note (starting "rules") on a result made under rules other than today's, with the
    limit checks' verdicts under today's (``rerun``: those checks, named, on evidence); none
    when the result's rules are today's or cannot be read (a check fails for it)."""
    try:
        recorded, today = evidence.rules, evidence.today_task.rules
    except Unavailable:
        return []
    if recorded.version == today.version:
        return []
    changed = "; ".join(recorded.differences(today)) or "the same values"
    before = {c.name: c for c in checks}
    after = rerun(evidence.under(today), LIMIT_CHECKS)
    fail = [c for c in after if not c.ok and (c.name not in before or before[c.name].ok)]
    passing = [c for c in after if c.ok and c.name in before and not before[c.name].ok]
    said = [f"the {c.name} check would fail ({_first(c.detail)})" for c in fail]
    said += [f"the {c.name} check would pass" for c in passing]
    verdict = "; ".join(said) if said else ("the result would pass as well" if all(c.ok for c in after)
                                           else "its limit checks would say the same")
    return [f"rules: made under {recorded.label}; today's are v{today.version} ({changed}): "
            f"under them {verdict}"]
