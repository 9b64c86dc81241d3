"""``runner export FORMAT RESULT...``: reproduced results in another benchmark's format
(DAWNBench's submission files, an MLPerf training submission tree). One subcommand per
format, each registered by a function in ``FORMATS``."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner.dawnbench import export_dawnbench
from runner.engine import get_client
from runner.entry_build import build_entry
from runner.manifest import load_entry
from runner.mlperf.config import load_submission, set_command


def run_dawnbench(args) -> int:
    written = export_dawnbench(Path(args.result), Path(args.out), args.author, args.email, args.hardware)
    console = Console(highlight=False)
    for path in written:
        console.print(f"wrote {escape(str(path))}")
    return 0


def register_dawnbench(formats) -> None:
    d = formats.add_parser(
        "dawnbench", help="DAWNBench submission files (train JSON + TSV, inference JSON)",
        description="Write RESULT (a results/<entry>/<run_id>/ folder) as DAWNBench submission files under "
        "OUT/<Task>/train/ and OUT/<Task>/inference/, named [author]_[model]_[hardware tag]_[framework].",
    )
    d.add_argument("result", help="a result folder (results/<entry>/<run_id>/) or a bundle's .tar.gz")
    d.add_argument("--out", default="dawnbench", metavar="DIR", help="where to write (default: ./dawnbench)")
    d.add_argument("--author", default="runner", help="the author field and file-name prefix (default: runner)")
    d.add_argument("--email", default="", help="the authorEmail field")
    d.add_argument("--hardware", help="the hardware field (default: the run's hardware profile)")
    d.set_defaults(func=run_dawnbench)


def export_mlperf(args) -> int:
    from runner.mlperf.export import export_mlperf as write_tree, package_check  # lazy: start-up (runner --help)

    submission = load_submission()
    exported = write_tree([Path(r) for r in args.results], Path(args.out), ruleset=args.ruleset,
                          submission=submission, allow_smoke=args.allow_smoke)
    out = exported.out
    console = Console(highlight=False)
    console.print(f"wrote the MLPerf training submission tree to {escape(str(out))}")
    for key in exported.unset:
        console.print(f"[yellow]left empty[/] {key} (MLPerf inference wants it): "
                      f"{escape(set_command(key.removeprefix('mlperf.')))}")
    if args.check:
        check = package_check(out, args.ruleset)
        console.print(escape(check.output))
        console.print("[green bold]package checker: SUCCESS[/]" if check.ok else "[red bold]package checker: FAILED[/]")
        return 0 if check.ok else 1
    console.print(f"check it: runner export mlperf ... --check, or python -m mlperf_logging.package_checker {out} "
                  f"training {args.ruleset}")
    console.print(f"score it: python -m mlperf_logging.result_summarizer {out} training {args.ruleset}")
    return 0


def register_mlperf(formats) -> None:
    p = formats.add_parser("mlperf", help="an MLPerf training submission tree (open division)",
                           description="Results, system description and code reference as MLPerf's "
                           "package_checker reads them; MLPerf scores resnet over exactly 5 runs.")
    p.add_argument("results", nargs="+", metavar="RESULT",
                   help="result folders or bundles' .tar.gz of one entry, each run once (5 for resnet)")
    p.add_argument("--ruleset", default="4.0.0", help="MLPerf training ruleset (default 4.0.0)")
    p.add_argument("--out", required=True, metavar="DIR", help="a new folder for the tree")
    p.add_argument("--allow-smoke", action="store_true", help="accept smoke runs (to try the format only)")
    p.add_argument("--check", action="store_true",
                   help="run MLPerf's package checker on the tree (needs the [mlperf] extra)")
    p.set_defaults(func=export_mlperf)


def export_image(args) -> int:
    """The entry's image as a ``docker save`` archive named by its own SHA-256, beside a JSON
    record of the image id (what every result of the entry names) and the archive's digest."""
    entry = load_entry(args.entry)
    if args.smoke:
        entry = entry.for_smoke()
    client = get_client()
    built = build_entry(entry, client)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    partial = out / f".{entry.name}.partial-{os.getpid()}.tar"
    digest = hashlib.sha256()
    try:
        with open(partial, "wb") as fh:
            for chunk in client.images.get(built.image_id).save(named=True, chunk_size=1 << 20):
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
    console = Console(highlight=False)
    console.print(f"wrote {escape(str(archive))} (sha256 {digest.hexdigest()}), image {built.image_id}")
    console.print(f"an Apptainer site converts it with: {record['convert']}")
    return 0


def register_image(formats) -> None:
    p = formats.add_parser("image", help="the entry's image as a digest-named docker-archive (for Apptainer sites)",
                           description="Build (or find) ENTRY's image and write it as a `docker save` archive "
                           "named by its SHA-256, with a JSON record of the image id every result names.")
    p.add_argument("entry", help="an entry folder")
    p.add_argument("--out", default=".", metavar="DIR", help="where to write (default: here)")
    p.add_argument("--smoke", action="store_true", help="the image a --smoke run uses")
    p.set_defaults(func=export_image)


# Each exporter adds its own subparser here.
FORMATS = [register_dawnbench, register_mlperf, register_image]


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="write a result in another benchmark's format",
                              description="Write a reproduced result in another benchmark's submission format.")
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    for add in FORMATS:
        add(formats)
