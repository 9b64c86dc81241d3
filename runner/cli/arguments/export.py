"""``runner export``'s arguments: one action per format, each added by a function in ``FORMATS``
and run by the function it names in ``runner.cli.export``."""

import argparse

from runner.cli.argtypes import trusted_keys_argument

DESCRIPTION = "Write a reproduced result in another benchmark's submission format."


def dawnbench(formats) -> None:
    d = formats.add_parser(
        "dawnbench", help="DAWNBench submission files (train JSON + TSV, inference JSON)",
        description="Write RESULT (a results/<entry>/<run_id>/ folder or a bundle's .tar.gz) as DAWNBench "
        "submission files under OUT/<Task>/train/ and OUT/<Task>/inference/, named "
        "[author]_[model]_[hardware tag]_[framework]. Only a run that counts (`runner verify` exits 0) "
        "is exported.",
    )
    d.add_argument("result", help="a result folder (results/<entry>/<run_id>/) or a bundle's .tar.gz")
    d.add_argument("-o", "--out", default="dawnbench", metavar="DIR", help="where to write (default: ./dawnbench)")
    d.add_argument("--author", default="runner", help="the author field and file-name prefix (default: runner)")
    d.add_argument("--email", default="", help="the authorEmail field")
    d.add_argument("--hardware", help="the hardware field (default: the run's hardware profile)")
    trusted_keys_argument(d)
    d.set_defaults(func="run_dawnbench")


def mlperf(formats) -> None:
    p = formats.add_parser("mlperf", help="an MLPerf training submission tree (open division)",
                           description="Results, system description and code reference as MLPerf's "
                           "package_checker reads them; MLPerf scores resnet over exactly 5 runs. Every run must "
                           "count (`runner verify` exits 0 on it), have its own seed and come from one host class "
                           "(hardware profile, CPU and GPU models and counts). The closed division is refused.")
    p.add_argument("results", nargs="+", metavar="RESULT",
                   help="result folders or bundles' .tar.gz of one entry, each run once (5 for resnet)")
    p.add_argument("--ruleset", default="4.0.0", help="MLPerf training ruleset (default 4.0.0)")
    p.add_argument("-o", "--out", required=True, metavar="DIR", help="a new folder for the tree")
    trusted_keys_argument(p)
    p.add_argument("--allow-smoke", action="store_true",
                   help="accept smoke runs, to try the format: the tree is marked NOT_A_SUBMISSION.txt")
    p.add_argument("--check", action=argparse.BooleanOptionalAction, default=None,
                   help="run MLPerf's package checker on the tree and fail the export if it fails (default: when "
                   "mlperf-logging is installed; --check requires it, --no-check skips it)")
    p.set_defaults(func="export_mlperf")


def image(formats) -> None:
    p = formats.add_parser("image", help="the entry's image as a digest-named docker-archive (for Apptainer sites)",
                           description="Build (or find) ENTRY's image and write it as a `docker save` archive "
                           "named by its SHA-256, with a JSON record of the image id every result names.")
    p.add_argument("entry", help="an entry folder")
    p.add_argument("-o", "--out", default=".", metavar="DIR", help="where to write (default: here)")
    p.add_argument("--smoke", action="store_true", help="the image a --smoke run uses")
    p.set_defaults(func="export_image")


# Each exporter adds its own subparser here.
FORMATS = [dawnbench, mlperf, image]


def register(p) -> None:
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    for add in FORMATS:
        add(formats)
    for sub in formats.choices.values():  # every exporter says what it wrote as JSON on request
        sub.add_argument("--json", action="store_true", help="print what was written as JSON")
