"""``runner leaderboard``: DAWNBench's tables, claims beside reproductions, in the terminal
and (``--html DIR``) as a static site with each reproduction's plots."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from runner import paths
from runner.leaderboard import build
from runner.leaderboard.html import write_site
from runner.keys.trust import trusted_keys
from runner.leaderboard.site_folder import check_target
from runner.leaderboard.terminal import print_tables
from runner.terminal import json_text, markup


def run(args) -> int:
    results = Path(args.results) if args.results else paths.results_dir()
    if args.html:  # refused before any work when it holds files the runner did not write
        check_target(Path(args.html).absolute())
    keys = trusted_keys(args.trusted_keys)
    board = build(results, keys)
    tables = [t for t in board.tables if not args.task or t.task.task_id in args.task]
    if args.json:
        from runner.leaderboard.as_json import board_dict  # lazy: start-up (only for --json)

        data = board_dict(board, tables)
        if args.top:
            for table in data["tables"]:
                table["rows"] = table["rows"][:args.top]
        if args.html:
            site = write_site(Path(args.html), tables, board.claims, board.reproductions, keys, board.studies)
            data["site"] = str(site)
        print(json_text(data, indent=2))
        return 0
    console = Console(highlight=False)
    for problem in board.skipped:
        console.print(f"[yellow]skipped[/]: {markup(problem)}")
    print_tables(tables, console, args.top)
    if args.html:
        index = write_site(Path(args.html), tables, board.claims, board.reproductions, keys, board.studies)
        console.print(f"wrote the site: {markup(str(index))} (open it from disk, or publish the folder as it is)")
    return 0
