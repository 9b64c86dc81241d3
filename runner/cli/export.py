"""``runner export <format> ...``: write results in the field's own formats.

One function per format (``mlperf`` here); each registers its own subcommand.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console


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


FORMATS = [register_mlperf]


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="write results in the field's formats (mlperf)",
                              description="Write reproduced results in another project's format.")
    formats = p.add_subparsers(dest="export_format", metavar="FORMAT", required=True)
    for add in FORMATS:
        add(formats)
