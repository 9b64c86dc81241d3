"""``runner leaderboard``: DAWNBench's tables, claims beside reproductions, in the terminal
and (``--html DIR``) as a static site with each reproduction's plots."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner import paths
from runner.keys import load_trusted_keys
from runner.leaderboard import build
from runner.leaderboard.html import write_site
from runner.leaderboard.reproductions import ARCHIVE_DIR
from runner.leaderboard.terminal import print_tables
from runner.tasks import TASKS

ARCHIVE_KEYS = "keys"


def trusted_keys(option: str | None, results: Path) -> list:
    """--trusted-keys, else your own key plus the keys published beside the archive."""
    if option:
        return load_trusted_keys(Path(option))
    keys = load_trusted_keys(None)
    archive_keys = results / ARCHIVE_DIR / ARCHIVE_KEYS
    if archive_keys.is_dir() and any(archive_keys.glob("*.pub.json")):
        keys += load_trusted_keys(archive_keys)
    return keys


def run(args) -> int:
    results = Path(args.results) if args.results else paths.results_dir()
    keys = trusted_keys(args.trusted_keys, results)
    board = build(results, keys)
    tables = [t for t in board.tables if not args.task or t.task.task_id in args.task]
    console = Console(highlight=False)
    for problem in board.skipped:
        console.print(f"[yellow]skipped[/]: {escape(problem)}")
    print_tables(tables, console, args.top)
    if args.html:
        index = write_site(Path(args.html), tables, board.claims, board.reproductions, keys)
        console.print(f"wrote the site: {index} (open it from disk, or publish the folder as it is)")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "leaderboard", help="DAWNBench's tables: claims beside their reproductions",
        description="Build DAWNBench's leaderboard tables (training time and cost, inference latency and cost) "
        "from imported claims (runner import dawnbench) and reproduced results; a reproduction counts only "
        "when it is signed by a trusted key, intact, complete and conforming.",
    )
    p.add_argument("--results", metavar="DIR", help="the results folder (default: the repository's results/)")
    p.add_argument("--html", metavar="OUT_DIR",
                   help="also write a site you can publish here: an index, a page per task and per reproduction "
                   "(curves, latencies, fingerprints, signed bundles, the verify command); relative links only")
    p.add_argument("--task", action="append", choices=sorted(TASKS), help="only this task's tables (repeatable)")
    p.add_argument("--top", type=int, metavar="N", help="print only the first N rows of each table")
    p.add_argument("--trusted-keys", metavar="PATH",
                   help="a *.pub.json or a folder of them (default: your key and RESULTS/archive/keys/)")
    p.set_defaults(func=run)
