"""``runner import``'s arguments: one action per format read."""

from runner.tasks import TASKS

DESCRIPTION = "Read another benchmark's published results into claims the leaderboard compares against."


def register(p) -> None:
    formats = p.add_subparsers(dest="format", metavar="FORMAT", required=True)
    d = formats.add_parser(
        "dawnbench", help="DAWNBench submission files (train JSON + TSV, inference JSON)",
        description="Read DAWNBench submission files (a JSON file, or a folder walked recursively, laid out as "
        "stanford-futuredata/dawn-bench-entries) into claims under RESULTS/claims/.",
    )
    d.add_argument("path", help="a submission JSON (or its TSV), or a folder of them")
    d.add_argument("--task", choices=sorted(TASKS), help="the task of every file read (default: from its <Task>/ folder)")
    d.add_argument("--results", metavar="DIR", help="the results folder (default: the repository's results/)")
    d.set_defaults(func="run_dawnbench")
