"""``information``: the entry's information budget (threat-model class 4), re-checked offline.

The entry-folder part is recomputed from the entry's files the bundle carries (the same
``measure_entry``, the lock the manifest names counted without its hashes); the image part
(the files a build step added) cannot be, without the image, so it is read from
``image-audit.json`` and held to match ``result.json``; so is the part of the locked wheels
off the allow-list (the wheels are not in the bundle), but which wheels were exempt is held
to the auditor's own allow-list: a wheel the record calls reviewed must be on it (name,
version and digest), and every pin of the bundle's lock must be in the record, reviewed or
counted. The budget must be the one of the task's rules the result was made under
(``Evidence.rules``). A result that claims conforming while over the budget fails, and so
does one that claims less information than its files carry. Results written before the budget pass, saying that they have no record; results
written before the wheels counted, saying that their wheels were not.
"""

from __future__ import annotations

from runner import safe_read
from runner.entry_build.context import entry_files
from runner.entry_build.image_inspection import INSPECTION_FILE
from runner.entry_build.information import InformationReport, measure_entry
from runner.entry_build.lockfile import normalise_name, parse_lock
from runner.entry_build.wheel_allowlist import load_allowlist
from runner.errors import UserError
from runner.manifest.untrusted_yaml import load_untrusted_yaml
from runner.verify.evidence import Evidence
from runner.verify.hardware import ran_on_host
from runner.verify.report import Verdict

# Compressors of other versions may differ by a few bytes a file.
SLACK = 0.02
SLACK_BYTES = 64


def _lock_name(ev: Evidence) -> str | None:
    """The lock the entry's manifest names for this run (its smoke lock for a smoke run)."""
    manifest = ev.root / "entry" / "entry.yaml"
    if not manifest.is_file():
        return None
    data = load_untrusted_yaml(manifest, "entry.yaml")
    if not isinstance(data, dict):
        return None
    smoke = data.get("smoke")
    if not isinstance(smoke, dict):
        smoke = {}
    name = smoke.get("lock") if ev.smoke and smoke.get("lock") else data.get("lock", "requirements.lock")
    return name if isinstance(name, str) else None


def describe(report: InformationReport) -> str:
    """Per file and in total, with the largest literal: what ``verify`` prints."""
    entry = [f for f in report.files if f.origin == "entry"]
    image = sorted((f for f in report.files if f.origin == "image"), key=lambda f: -f.compressed)
    files = ", ".join(f"{f.path} {f.compressed}" for f in sorted(entry, key=lambda f: -f.compressed))
    added = (f"; image: {report.part('image')} bytes in {len(image)} added files (largest "
             + ", ".join(f"{f.path} {f.compressed}" for f in image[:3]) + ")") if image else "; image: nothing added"
    literal = report.largest_literal
    largest = (f"; largest literal {literal.where} ({literal.kind}, {literal.compressed} bytes)"
               if literal else "")
    wheels = f"; {report.describe_wheels()}" if report.wheels else ""
    return (f"{report.total} bytes of information (compressed) of a budget of {report.budget} "
            f"({report.budget_from}); entry: {files}{added}{wheels}{largest}")


def wheel_problems(recorded: InformationReport, lock) -> list[str]:
    """The record's exempt wheels against the auditor's allow-list, and the bundle's lock
    against the record's wheels (``lock``: the lock's path in the bundle, or None)."""
    allowlist = load_allowlist()
    problems = []
    for wheel in recorded.wheels:
        name, _, version = wheel.wheel.partition("==")
        if wheel.reviewed and not allowlist.holds(name, version, wheel.sha256):
            problems.append(f"the record exempts {wheel.wheel} (sha256 {wheel.sha256[:16]}...), "
                            f"which the auditor's allow-list does not hold")
    if lock is None or not lock.is_file():
        return problems
    try:
        pins = parse_lock(lock)
    except UserError as e:
        return problems + [f"the bundle's lock cannot be read: {e}"]
    recorded_names = {normalise_name(w.wheel.partition("==")[0]): w for w in recorded.wheels}
    for pin in pins:
        found = recorded_names.get(pin.key)
        if found is None and not pin.marker:
            problems.append(f"the lock pins {pin.name}=={pin.version}, which the record neither exempts nor counts")
        elif found is not None and found.sha256 not in pin.hashes:
            problems.append(f"the record's {found.wheel} (sha256 {found.sha256[:16]}...) is not a wheel "
                            f"the lock's pin of {pin.name} allows")
    return problems


def check_information(ev: Evidence) -> Verdict:
    summary = ev.claim("image_audit", "information")
    if summary is None:
        return Verdict(True, "no information record: the result predates the information budget")
    if not isinstance(summary, dict):
        return Verdict(False, "image_audit.information is malformed")
    try:  # the bundle's files are untrusted: a regular file of bounded size, never a FIFO
        audit = safe_read.read_json(ev.root / INSPECTION_FILE, "report")
    except UserError as e:
        return Verdict(False, f"{INSPECTION_FILE} cannot be read: {e.problem}")
    if not isinstance(audit, dict) or not isinstance(audit.get("information") or {}, dict):
        return Verdict(False, f"{INSPECTION_FILE} is malformed (not an object with an information record)")
    recorded = InformationReport.from_dict((audit or {}).get("information") or {})
    counts_wheels = "wheels" in ((audit or {}).get("information") or {})  # written since the wheels count
    problems = []
    if (summary.get("total"), summary.get("budget")) != (recorded.total, recorded.budget):
        problems.append(f"result.json says {summary.get('total')} bytes of a budget of {summary.get('budget')}, "
                        f"{INSPECTION_FILE} {recorded.total} of {recorded.budget}")
    budget, source = ev.rules.information_budget, ev.rules.label
    if recorded.budget > budget:
        problems.append(f"its budget of {recorded.budget} bytes is over the task's {budget} ({source})")
    lock = _lock_name(ev)
    folder = ev.root / "entry"
    try:  # streamed, each file known by its size first (runner.entry_build.information)
        mine = measure_entry(folder, entry_files(folder), folder / lock if lock else None)
    except UserError as e:
        return Verdict(False, f"the entry's files cannot be measured: {e.problem}")
    claimed_entry = recorded.part("entry")
    if mine.total > claimed_entry * (1 + SLACK) + SLACK_BYTES:
        problems.append(f"the entry's files carry {mine.total} bytes of information, the result claims {claimed_entry}")
    if counts_wheels and not ran_on_host(ev):  # the host engine installs nothing of the lock
        problems += wheel_problems(recorded, folder / lock if lock else None)
    total = max(mine.total, claimed_entry) + recorded.part("image") + recorded.part("wheel")
    over = total > min(budget, recorded.budget)
    if over and ev.claim("conforming"):
        problems.append(f"claims conforming, but {total} bytes of information is over the budget "
                        f"of {min(budget, recorded.budget)}")
    if problems:
        return Verdict(False, "; ".join(problems))
    counted = "" if counts_wheels else "; the record predates counting the locked wheels' files"
    return Verdict(True, describe(recorded) + counted + ("; marked non-conforming for it" if over else ""))
