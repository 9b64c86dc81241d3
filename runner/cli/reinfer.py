"""``runner reinfer ENTRY``: re-run only the inference phase on a result's trained model.

The command parses its flags, calls ``runner.reinference.reinfer`` (which finds and checks
the result, runs the harness and swaps the new inference in only on success) and renders
the backends' table.
"""

from __future__ import annotations


from rich.console import Console

from runner.cli.records import print_inference
from runner.reinference import reinfer
from runner.report import Reporter, reporting
from runner.terminal import json_text




def run(args) -> int:
    console = Console()
    if args.json:  # stdout is the JSON's alone: the progress goes to stderr
        with reporting(Reporter(Console(stderr=True))):
            outcome = reinfer(args.entry, result_dir=args.result, backends=args.backends, threads=args.threads)
        print(json_text({"result": str(outcome.result_dir), "replaced": outcome.replaced, "kept": outcome.kept,
                          "inference": {name: rec.to_dict() for name, rec in outcome.inference.items()}},
                         indent=2))
        return 0 if outcome.passed else 1
    outcome = reinfer(args.entry, result_dir=args.result, backends=args.backends, threads=args.threads,
                      on_timed=lambda metric, inference: print_inference(console, metric, inference))
    return 0 if outcome.passed else 1
