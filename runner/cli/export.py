"""``runner export FORMAT RESULT``: a reproduced result in another benchmark's format.
One subcommand per format, each registered by a function in ``FORMATS``."""

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


# Each exporter adds its own subparser here.
FORMATS = [register_dawnbench]


def register(subparsers) -> None:
    p = subparsers.add_parser("export", help="write a result in another benchmark's format",
                              description="Write a reproduced result in another benchmark's submission format.")
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    for add in FORMATS:
        add(formats)
