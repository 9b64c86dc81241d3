"""``runner export FORMAT RESULT...``: reproduced results in another benchmark's format
(DAWNBench's submission files, an MLPerf training submission tree, an entry's image). One
action per format, each added by a function in ``runner.cli.arguments.export.FORMATS`` and run
by the function here that it names."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner.dawnbench import export_dawnbench
from runner.engine import get_engine
from runner.entry_build import build_entry
from runner.manifest import load_entry
from runner.mlperf.config import load_submission, set_command
from runner.terminal import json_text


def run_dawnbench(args) -> int:
    from runner.keys.trust import trusted_keys as trusted_keys_of  # lazy: start-up (runner --help)

    keys = trusted_keys_of(args.trusted_keys)
    written = export_dawnbench(Path(args.result), Path(args.out), args.author, args.email, args.hardware,
                               trusted_keys=keys)
    if args.json:
        print(json_text({"written": [str(p) for p in written]}, indent=2))
        return 0
    console = Console(highlight=False)
    for path in written:
        console.print(f"wrote {escape(str(path))}")
    return 0


def export_mlperf(args) -> int:
    """The tree, then MLPerf's package checker's verdict on it: exit 1 when it fails (the tree
    is left, marked as no submission, for inspection)."""
    from runner.keys.trust import trusted_keys  # lazy: start-up (runner --help)
    from runner.mlperf.export import NOT_A_SUBMISSION, export_mlperf as write_tree  # lazy: start-up (runner --help)

    exported = write_tree([Path(r) for r in args.results], Path(args.out), trusted=trusted_keys(args.trusted_keys),
                          ruleset=args.ruleset, submission=load_submission(), allow_smoke=args.allow_smoke,
                          check=args.check)
    out, check = exported.out, exported.check
    code = 0 if check is None or check.ok else 1
    if args.json:
        checker = ({"ran": False, "why": exported.unchecked} if check is None else
                   {"ran": True, "ok": check.ok, "findings": check.findings, "log": str(check.log)})
        print(json_text({"out": str(out), "submission": exported.submission, "smoke": exported.smoke,
                          "left_empty": list(exported.unset), "package_checker": checker}, indent=2))
        return code
    console = Console(highlight=False)
    console.print(f"wrote the MLPerf training submission tree to {escape(str(out))}")
    for key in exported.unset:
        console.print(f"[yellow]left empty[/] {key} (MLPerf inference wants it): "
                      f"{escape(set_command(key.removeprefix('mlperf.')))}")
    if exported.smoke:
        console.print("[yellow bold]not a submission[/]: it holds smoke runs (--allow-smoke), which never count")
    if check is None:
        console.print(f"[yellow]not checked[/] ({escape(exported.unchecked or '')}): "
                      f"python -m mlperf_logging.package_checker {escape(str(out))} training {args.ruleset}")
    elif check.ok:
        console.print("[green bold]package checker: SUCCESS[/]")
    else:
        for line in check.findings:
            console.print(f"  {escape(line)}")
        console.print(f"[red bold]package checker: FAILED[/]: the tree is left for inspection, marked "
                      f"{escape(str(out / NOT_A_SUBMISSION))}; the checker's output: {escape(str(check.log))}")
        return code
    console.print(f"score it: python -m mlperf_logging.result_summarizer {escape(str(out))} training {args.ruleset}")
    return code


def export_image(args) -> int:
    """The entry's image as a ``docker save`` archive named by its own SHA-256, beside a JSON
    record of the image id (what every result of the entry names) and the archive's digest."""
    entry = load_entry(args.entry)
    if args.smoke:
        entry = entry.for_smoke()
    engine = get_engine()
    built = build_entry(entry, engine)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{entry.name}.partial-", suffix=".tar", dir=out)  # ours alone
    partial = Path(name)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as fh:
            for chunk in engine.export_image(built.image_id):
                digest.update(chunk)
                fh.write(chunk)
        archive = out / f"{entry.name}-sha256-{digest.hexdigest()[:16]}.tar"
        partial.replace(archive)
    finally:
        partial.unlink(missing_ok=True)
    record = {"entry": entry.name, "image_id": built.image_id, "tag": built.tag,
              "archive": archive.name, "archive_sha256": digest.hexdigest(),
              "convert": f"apptainer build {entry.name}.sif docker-archive:{archive.name}"}
    (archive.with_suffix(".json")).write_text(json.dumps(record, indent=2) + "\n")
    if args.json:
        print(json_text({**record, "archive": str(archive)}, indent=2))
        return 0
    console = Console(highlight=False)
    console.print(f"wrote {escape(str(archive))} (sha256 {digest.hexdigest()}), image {built.image_id}")
    console.print(f"an Apptainer site converts it with: {record['convert']}")
    return 0
