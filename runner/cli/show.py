"""``runner show RUN``: one run's summary, its curve drawn in the terminal, where its files are."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from runner import paths
from runner.terminal import print_json


def run(args) -> int:
    from runner.runs import find_run, read_result, row_at  # lazy: start-up (only what the run's view reads)
    from runner.runs.cache import context_digest  # lazy: start-up (as above)
    from runner.runs.show import view_run  # lazy: start-up (as above)
    from runner.runs.terminal import show_renderable  # lazy: start-up (as above)

    def keys():
        from runner.keys.trust import trusted_keys  # lazy: heavy (the signing libraries: only a run not cached)

        return trusted_keys(args.trusted_keys)

    results = Path(args.results) if args.results else paths.results_dir()
    ref = Path(args.run)
    if ref.is_file():  # a bundle's .tar.gz, opened safely into a temporary folder
        from runner.bundle.open import Limits, open_bundle  # lazy: heavy (only a bundle's .tar.gz is opened)
        from runner.runs import judge, row_of  # lazy: start-up (as above)

        with open_bundle(ref, Limits()) as opened:
            result = read_result(opened.root)
            view = view_run(opened.root, result, row_of(opened.root, result, judge(ref, keys())), str(ref),
                            bundle=True)
    else:
        folder = find_run(args.run, results)
        row = row_at(folder, keys, context_digest(args.trusted_keys))
        view = view_run(folder, read_result(folder), row, str(folder), bundle=False)
    if args.json:
        print_json(view.to_dict())
        return 0
    console = Console(highlight=False)
    console.print(show_renderable(view, console.width), crop=False)  # paths whole (runner.terminal.whole)
    return 0
