"""``runner ls [ENTRY]``: the runs under the results folder, one row each."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from runner import paths
from runner.terminal import markup, print_json, whole


def run(args) -> int:
    from runner.runs import list_runs  # lazy: start-up (only what the listing reads)
    from runner.runs.cache import context_digest  # lazy: start-up (as above)
    from runner.runs.terminal import ls_renderables  # lazy: start-up (as above)

    def keys():
        from runner.keys.trust import trusted_keys  # lazy: heavy (the signing libraries: only a run not cached)

        return trusted_keys(args.trusted_keys)

    results = Path(args.results) if args.results else paths.results_dir()
    entry = Path(args.entry).name if args.entry else None
    rows, skipped = list_runs(results, entry, keys, context_digest(args.trusted_keys))
    if args.json:
        print_json({"results": str(results), "runs": [r.to_dict() for r in rows], "skipped": skipped})
        return 0
    console = Console(highlight=False)
    for problem in skipped:  # one line each, however long: the file and why it cannot be read
        console.print(f"[yellow]unreadable[/]: {markup(problem)}", soft_wrap=True)
    if not rows:
        where = f"of {entry} " if entry else ""
        console.print(f"no runs {where}under:")
        console.print(whole(results), soft_wrap=True)  # the path whole, never folded
        console.print("(`runner reproduce ENTRY` makes one)")
        return 0
    for i, renderable in enumerate(ls_renderables(rows, console.width)):
        if i:
            console.print()
        console.print(renderable)
    return 0
