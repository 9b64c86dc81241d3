"""``runner show RUN``: one run's summary, its curve drawn in the terminal, where its files are."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from runner import paths
from runner.terminal import print_json


def run(args) -> int:
    from runner.bundle.open import Limits, open_bundle  # lazy: start-up (only a bundle's .tar.gz is opened)
    from runner.runs import find_run, judge, read_result, row_of  # lazy: start-up (verify's modules)
    from runner.runs.show import view_run  # lazy: start-up (signature checks import verify's modules)
    from runner.runs.terminal import show_renderable  # lazy: start-up (signature checks import verify's modules)
    from runner.keys.trust import trusted_keys  # lazy: start-up (signature checks import verify's modules)

    results = Path(args.results) if args.results else paths.results_dir()
    keys = trusted_keys(args.trusted_keys)
    ref = Path(args.run)
    if ref.is_file():  # a bundle's .tar.gz, opened safely into a temporary folder
        with open_bundle(ref, Limits()) as opened:
            result = read_result(opened.root)
            view = view_run(opened.root, result, row_of(opened.root, result, judge(ref, keys)), str(ref), bundle=True)
    else:
        folder = find_run(args.run, results)
        result = read_result(folder)
        view = view_run(folder, result, row_of(folder, result, judge(folder, keys)), str(folder), bundle=False)
    if args.json:
        print_json(view.to_dict())
        return 0
    console = Console(highlight=False)
    console.print(show_renderable(view, console.width))
    return 0
