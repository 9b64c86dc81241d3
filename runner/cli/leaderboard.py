"""``runner leaderboard``: DAWNBench's tables, claims beside reproductions, in the terminal
and (``--html DIR``) as a static site with each reproduction's plots."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from runner import paths
from runner.cli import argtypes
from runner.leaderboard import build
from runner.leaderboard.html import write_site
from runner.leaderboard.terminal import print_tables
from runner.tasks import TASKS
from runner.verify.trust import default_trusted_keys

def run(args) -> int:
    results = Path(args.results) if args.results else paths.results_dir()
    board = build(results, default_trusted_keys(args.trusted_keys, results))
    tables = [t for t in board.tables if not args.task or t.task.task_id in args.task]
    if args.json:
        from runner.leaderboard.as_json import board_dict  # lazy: only for --json

        data = board_dict(board, tables)
        if args.top:
            for table in data["tables"]:
                table["rows"] = table["rows"][:args.top]
        if args.html:
            data["site"] = str(write_site(Path(args.html), tables, board.claims, board.reproductions))
        print(json.dumps(data, indent=2))
        return 0
    console = Console(highlight=False)
    for problem in board.skipped:
        console.print(f"[yellow]skipped[/]: {escape(problem)}")
    print_tables(tables, console, args.top)
    if args.html:
        index = write_site(Path(args.html), tables, board.claims, board.reproductions)
        console.print(f"wrote {index}")
    return 0


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "leaderboard", help="DAWNBench's tables: claims beside their reproductions",
        description="Build DAWNBench's leaderboard tables (training time and cost, inference latency and cost) "
        "from imported claims (runner import dawnbench) and reproduced results; a reproduction counts only "
        "when it is signed by a trusted key, intact, complete and conforming.",
    )
    p.add_argument("--html", metavar="OUT_DIR", help="also write a static site (index.html and plots) here")
    p.add_argument("--task", action="append", choices=sorted(TASKS), help="only this task's tables (repeatable)")
    p.add_argument("--top", type=int, metavar="N", help="print only the first N rows of each table")
    argtypes.results_arguments(p, "the tables, their rows' raw figures and every reproduction's verdict")
    p.set_defaults(func=run)
