"""``runner export FORMAT RESULT...``: reproduced results in another benchmark's format
(DAWNBench's submission files, an MLPerf training submission tree). One subcommand per
format, each registered by a function in ``FORMATS``."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner.dawnbench import export_dawnbench


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
    from runner.mlperf.config import load_submission, set_command
    from runner.mlperf.export import export_mlperf as write_tree, unset_settings

    submission = load_submission()
    out = write_tree([Path(r) for r in args.results], Path(args.out), ruleset=args.ruleset,
                     submission=submission, allow_smoke=args.allow_smoke)
    console = Console()
    console.print(f"wrote the MLPerf training submission tree to {out}")
    for key in unset_settings(Path(args.results[0]), submission):
        console.print(f"[yellow]left empty[/] {key} (MLPerf inference wants it): "
                      f"{set_command(key.removeprefix('mlperf.'))}")
    console.print(f"check it: python -m mlperf_logging.package_checker {out} training {args.ruleset}")
    console.print(f"score it: python -m mlperf_logging.result_summarizer {out} training {args.ruleset}")
    return 0


def register_mlperf(formats) -> None:
    p = formats.add_parser("mlperf", help="an MLPerf training submission tree (open division)",
                           description="Results, system description and code reference as MLPerf's "
                           "package_checker reads them; MLPerf scores resnet over exactly 5 runs.")
    p.add_argument("results", nargs="+", metavar="RESULT", help="result folders of one entry (5 for resnet)")
    p.add_argument("--ruleset", default="4.0.0", help="MLPerf training ruleset (default 4.0.0)")
    p.add_argument("--out", required=True, metavar="DIR", help="a new folder for the tree")
    p.add_argument("--allow-smoke", action="store_true", help="accept smoke runs (to try the format only)")
    p.set_defaults(func=export_mlperf)


# Each exporter adds its own subparser here.
FORMATS = [register_dawnbench, register_mlperf]


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="write a result in another benchmark's format",
                              description="Write a reproduced result in another benchmark's submission format.")
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    for add in FORMATS:
        add(formats)
